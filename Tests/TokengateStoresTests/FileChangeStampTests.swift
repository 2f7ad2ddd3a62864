//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateStores

/// The SQLite store's check before each statement is one `stat`: the stamp names the file as well as when it
/// changed, so a replaced file and one written over are told apart from the same call.
@Suite struct FileChangeStampTests {
    @Test func oneStampTellsAReplacedFileFromOneWrittenOver() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        try Data("one".utf8).write(to: URL(fileURLWithPath: path))
        let first = try #require(FileChangeStamp(path: path))
        #expect(first.file == FileIdentity(path: path))
        #expect(FileChangeStamp(path: path) == first, "nothing changed")

        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.write(contentsOf: Data("three".utf8))
        try handle.close()
        let written = try #require(FileChangeStamp(path: path))
        #expect(written.file == first.file, "the same file")
        #expect(written != first, "written over")

        let other = directory.file("other.db")
        try Data("one".utf8).write(to: URL(fileURLWithPath: other))
        #expect(rename(other, path) == 0)
        let replaced = try #require(FileChangeStamp(path: path))
        #expect(replaced.file != first.file, "another file")
        #expect(replaced.file == FileIdentity(path: path))

        try FileManager.default.removeItem(atPath: path)
        #expect(FileChangeStamp(path: path) == nil)
    }
}
