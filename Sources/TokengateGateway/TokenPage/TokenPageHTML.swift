//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP

/// The frame every HTML page of the token page shares (the token page, the confirmation page, their refusals):
/// one place for the document's head, so no page can come out without the charset or the viewport, or with the
/// referrer rule of another.
enum TokenPageHTML {
    /// A whole document. `title` and `body` are HTML already (the caller escapes what came from outside);
    /// `referrer` is the `<meta name="referrer">` policy, when the page has one of its own.
    static func document(title: String, referrer: String?, body: String) -> String {
        var html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        if let referrer {
            html += "<meta name=\"referrer\" content=\"" + referrer + "\">\n"
        }
        html += "<title>" + title + "</title>\n</head>\n<body>\n" + body + "</body>\n</html>\n"
        return html
    }
}
