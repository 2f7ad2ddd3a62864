#!/usr/bin/env python3
"""Writes tokengate's man page, tokengate(1), from the argument parser's own description of the command line.

Usage: generate-manual.py TOKENGATE_BINARY OUTPUT_DIRECTORY VERSION

Reads `tokengate --experimental-dump-help` (swift-argument-parser's ToolInfo JSON: every subcommand, argument,
option and its help text), so the page can never drift from the CLI. One page, a section per subcommand, as
git(1) and nginx(8) are read: `man tokengate`, then `/check-config`. swift-argument-parser's generate-manual
plugin writes the same from the same JSON, but building it runs a second SwiftPM build of the whole package
(plugins are built for the host, with the package graph resolved again); reading the JSON needs Python only.
"""
import json
import os
import subprocess
import sys
import time

binary, out_dir, version = sys.argv[1], sys.argv[2], sys.argv[3]
info = json.loads(subprocess.run([binary, "--experimental-dump-help"], check=True, capture_output=True, text=True).stdout)
root = info["command"]


def roff(text):
    """Escapes text for roff: backslashes, and a leading dot or apostrophe that would start a request."""
    text = (text or "").replace("\\", "\\e").replace("-", "\\-").replace("`", "")
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def flag_names(argument):
    names = []
    for name in argument.get("names", []):
        names.append(("-" if name["kind"] == "short" else "--") + name["name"])
    return names


def synopsis(command, path):
    parts = [f".B {' '.join(path)}"]
    for argument in command.get("arguments", []):
        if not argument.get("shouldDisplay", True) or argument.get("valueName") in ("help", "version"):
            continue
        if argument["kind"] == "positional":
            text = f"\\fI{argument['valueName']}\\fR" + ("..." if argument.get("isRepeating") else "")
        else:
            names = flag_names(argument)
            text = f"\\fB{roff(names[-1])}\\fR"
            if argument["kind"] == "option":
                text += f" \\fI{argument['valueName']}\\fR"
        parts.append(f"[{text}]" if argument.get("isOptional") else text)
    return parts[0] + ("\n" + " ".join(parts[1:]) if len(parts) > 1 else "")


def arguments(command):
    lines = []
    for argument in command.get("arguments", []):
        # --help and --version are the same for every subcommand: said once, in the synopsis.
        if not argument.get("shouldDisplay", True) or argument.get("valueName") in ("help", "version"):
            continue
        if argument["kind"] == "positional":
            label = f"\\fI{argument['valueName']}\\fR"
        else:
            label = ", ".join(f"\\fB{roff(n)}\\fR" for n in flag_names(argument))
            if argument["kind"] == "option":
                label += f" \\fI{argument['valueName']}\\fR"
        lines += [".TP", label, roff(argument.get("abstract", "")) or "\\&"]
        if argument.get("discussion"):
            lines.append(roff(argument["discussion"]))
        if argument.get("defaultValue") not in (None, ""):
            lines.append(f"(default: {roff(str(argument['defaultValue']))})")
    return lines


def commands(command, path):
    """Every subcommand, depth first, with its full path (`tokengate token mint`)."""
    for sub in command.get("subcommands", []):
        if sub["commandName"] == "help" or not sub.get("shouldDisplay", True):
            continue
        yield sub, path + [sub["commandName"]]
        yield from commands(sub, path + [sub["commandName"]])


date = time.strftime("%Y-%m-%d", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))))
page = [
    f'.TH TOKENGATE 1 "{date}" "tokengate {version}" "User Commands"',
    ".SH NAME",
    "tokengate \\- " + roff(root.get("abstract", "")),
    ".SH SYNOPSIS",
    ".B tokengate",
    "\\fIsubcommand\\fR [\\fIoptions\\fR]",
    ".br",
    ".B tokengate --version",
    ".SH DESCRIPTION",
    roff(root.get("abstract", "")),
    "Each subcommand is described below; \\fBtokengate\\fR \\fIsubcommand\\fR \\fB--help\\fR prints the same.",
    ".SH COMMANDS",
]
for sub, path in commands(root, ["tokengate"]):
    page += [".SS " + roff(" ".join(path[1:])), synopsis(sub, path), ".PP", roff(sub.get("abstract", ""))]
    if sub.get("discussion"):
        page += [".PP", roff(sub["discussion"])]
    if sub.get("arguments"):
        page += arguments(sub)
page += [
    ".SH ENVIRONMENT",
    "TOKENGATE_LISTEN, TOKENGATE_ADMIN_ADDRESS, TOKENGATE_ADMIN_SECRET_FILE, TOKENGATE_LOG_LEVEL,",
    "TOKENGATE_CUTOFFS_SQLITE, TOKENGATE_CUTOFFS_FILE, TOKENGATE_CUTOFFS_POSTGRES, TOKENGATE_CUTOFFS_PASSWORD_FILE",
    "and TOKENGATE_SIGNING_KEY_FILE replace the values of the configuration file they name",
    "(/usr/share/doc/tokengate/docs/configuration.md, \"Environment variables\").",
    ".SH EXIT STATUS",
    "0 success; 1 an invalid token (\\fBtoken verify\\fR); 64 usage; 65 bad data; 66 an input file missing;",
    "69 unavailable; 70 internal error; 71 a listener address in use; 73 an output file; 75 a store that did",
    "not answer; 78 a configuration to fix.",
    ".SH FILES",
    ".TP",
    "/etc/tokengate/tokengate.yaml",
    "the configuration the systemd unit serves",
    ".TP",
    "/var/lib/tokengate",
    "the state directory (the SQLite cutoff store)",
    ".SH SEE ALSO",
    "systemctl(1), /usr/share/doc/tokengate",
]
os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, "tokengate.1"), "w") as f:
    f.write("\n".join(page) + "\n")
