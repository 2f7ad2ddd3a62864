//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// CYaml is the libyaml copy vendored inside the Yams package (a target of that package, not a separate
// dependency). It is imported only here, only for its event parser, and never leaks past this file.
internal import CYaml

/// A streaming pass over the YAML events before `Yams.compose` builds a tree, to bound what composing costs.
///
/// Why this pass exists:
/// - Yams composes recursively (one Swift stack frame per nesting level), so a document of ten thousand `[`
///   could overflow the stack of whichever thread loads the configuration. The depth is checked here first.
/// - Yams resolves an alias by sharing the anchored node, which is cheap, but anything that walks the tree
///   afterwards (its own duplicate-key check hashes every mapping key; our decoder visits values) pays for the
///   *expanded* size. An "alias bomb" (each level a list of aliases to the previous level) is a few hundred
///   bytes that expand exponentially. The expanded node count is computed here, event by event, in linear time,
///   and refused beyond ``maximumExpandedNodes``.
/// - Explicit tags are refused: a configuration has no use for them and they change how scalars are read.
///
/// A libyaml syntax error is reported from here too, with libyaml's own problem text and position (and
/// without the snippet of the offending line that Yams adds, which could show a secret-looking value).
struct YAMLPreflight {
    struct Failure: Error, Equatable {
        var code: ConfigurationError.Code
        var line: Int?
        var column: Int?
        var message: String
    }

    /// Deeper than any tokengate configuration needs (about 7 levels), shallow enough for any thread's stack.
    static let maximumDepth = 32
    /// Generous for thousands of routes, yet small enough that walking the expanded tree is instant.
    static let maximumExpandedNodes = 200_000

    private struct Frame {
        var anchor: String?
        var expandedSize: Int
    }

    /// Checks `yaml` (UTF-8 bytes). Must not be empty (libyaml's input setter asserts a non-null buffer).
    static func check(_ yaml: [UInt8]) throws(Failure) {
        precondition(!yaml.isEmpty, "YAMLPreflight.check requires a non-empty document")
        var failure: Failure?
        yaml.withUnsafeBufferPointer { buffer in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else {
                failure = Failure(code: .tooComplex, line: nil, column: nil, message: "out of memory parsing YAML")
                return
            }
            // yaml_parser_delete must run after the last event is deleted; both are scoped to this closure.
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            failure = self.run(&parser, bytes: buffer)
        }
        if let failure {
            throw failure
        }
    }

    private static func run(_ parser: inout yaml_parser_t, bytes: UnsafeBufferPointer<UInt8>) -> Failure? {
        var stack: [Frame] = []
        var anchors: [String: Int] = [:]
        var expandedTotal = 0
        var documents = 0

        func position(_ mark: yaml_mark_t) -> (Int, Int) {
            (Int(mark.line) + 1, Int(mark.column) + 1)
        }

        /// Adds `size` expanded nodes to the innermost open collection and to the document total.
        func add(_ size: Int, at mark: yaml_mark_t) -> Failure? {
            expandedTotal += size
            if !stack.isEmpty {
                stack[stack.count - 1].expandedSize += size
            }
            guard expandedTotal <= self.maximumExpandedNodes else {
                let (line, column) = position(mark)
                return Failure(
                    code: .tooComplex,
                    line: line,
                    column: column,
                    message:
                        "the document expands to more than \(self.maximumExpandedNodes) nodes (too many aliases?)"
                )
            }
            return nil
        }

        func refuseTag(_ tag: UnsafeMutablePointer<yaml_char_t>?, at mark: yaml_mark_t) -> Failure? {
            guard tag != nil else {
                return nil
            }
            let (line, column) = position(mark)
            return Failure(
                code: .unsupportedYAML,
                line: line,
                column: column,
                message: "explicit YAML tags (!, !!str, ...) are not supported in the configuration"
            )
        }

        func name(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
            pointer.map { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
        }

        while true {
            var event = yaml_event_t()
            guard yaml_parser_parse(&parser, &event) == 1 else {
                return self.syntaxFailure(parser, bytes: bytes)
            }
            defer { yaml_event_delete(&event) }
            let mark = event.start_mark
            switch event.type {
            case YAML_STREAM_END_EVENT:
                return nil
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 {
                    let (line, column) = position(mark)
                    return Failure(
                        code: .unsupportedYAML,
                        line: line,
                        column: column,
                        message: "the configuration must be a single YAML document (found a second one)"
                    )
                }
            case YAML_SCALAR_EVENT:
                if let failure = refuseTag(event.data.scalar.tag, at: mark) {
                    return failure
                }
                if let failure = add(1, at: mark) {
                    return failure
                }
                if let anchor = name(event.data.scalar.anchor) {
                    anchors[anchor] = 1
                }
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                let isSequence = event.type == YAML_SEQUENCE_START_EVENT
                let tag = isSequence ? event.data.sequence_start.tag : event.data.mapping_start.tag
                if let failure = refuseTag(tag, at: mark) {
                    return failure
                }
                guard stack.count < self.maximumDepth else {
                    let (line, column) = position(mark)
                    return Failure(
                        code: .tooComplex,
                        line: line,
                        column: column,
                        message: "the document is nested more than \(self.maximumDepth) levels deep"
                    )
                }
                if let failure = add(1, at: mark) {
                    return failure
                }
                let anchor = name(isSequence ? event.data.sequence_start.anchor : event.data.mapping_start.anchor)
                stack.append(Frame(anchor: anchor, expandedSize: 1))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let frame = stack.popLast() else {
                    preconditionFailure("libyaml produced a collection end without a start")
                }
                if !stack.isEmpty {
                    // The child's nodes were already counted in the total; only the parent's subtree size grows.
                    stack[stack.count - 1].expandedSize += frame.expandedSize - 1
                }
                if let anchor = frame.anchor {
                    anchors[anchor] = frame.expandedSize
                }
            case YAML_ALIAS_EVENT:
                // An alias to an anchor that is not (yet) complete is an error Yams reports; count it as one node.
                let size = name(event.data.alias.anchor).flatMap { anchors[$0] } ?? 1
                if let failure = add(size, at: mark) {
                    return failure
                }
            default:
                // Stream start, document end and no-event carry nothing to bound.
                break
            }
        }
    }

    private static func syntaxFailure(_ parser: yaml_parser_t, bytes: UnsafeBufferPointer<UInt8>) -> Failure {
        let problem = parser.problem.map { String(cString: $0) } ?? "malformed YAML"
        if parser.error == YAML_READER_ERROR {
            // Reader errors carry a byte offset rather than a mark: turn it into a line and column.
            let offset = min(Int(parser.problem_offset), bytes.count)
            var line = 1
            var lineStart = 0
            for index in 0..<offset where bytes[index] == UInt8(ascii: "\n") {
                line += 1
                lineStart = index + 1
            }
            return Failure(code: .syntax, line: line, column: offset - lineStart + 1, message: problem)
        }
        if problem.hasPrefix("Maximum nesting level") {
            // libyaml's own limit (1000), hit by its scanner before our event-level limit when a flow collection
            // is opened many times on one line: the same refusal, in our words.
            return Failure(
                code: .tooComplex,
                line: Int(parser.problem_mark.line) + 1,
                column: Int(parser.problem_mark.column) + 1,
                message: "the document is nested more than \(self.maximumDepth) levels deep"
            )
        }
        var message = problem
        if let context = parser.context.map({ String(cString: $0) }) {
            message +=
                " (\(context) started at line \(parser.context_mark.line + 1), column "
                + "\(parser.context_mark.column + 1))"
        }
        return Failure(
            code: .syntax,
            line: Int(parser.problem_mark.line) + 1,
            column: Int(parser.problem_mark.column) + 1,
            message: message
        )
    }
}
