#!/usr/bin/env bash
# Checks that the documentation stays reference documentation:
#   1. no user-facing text, script or code comment speaks of how tokengate was developed (words such as
#      "landing", "milestone", "issue 7", "steps 30–34 below", "round of fixes", "helper session", "seed 004"),
#      the measurement page docs/performance.md and the Benchmarks package included — changes by
#      version belong in CHANGELOG.md;
#   2. docs/troubleshooting.md has a row for every rejection reason the gateway logs (the token reasons of
#      RejectionReason, the gateway's own list in GatewayMetrics, and the token page's code and confirmation
#      refusals), so a reason found in a log can always be looked up;
#   3. CHANGELOG.md has a section for the version in Sources/TokengateVersion, docs/upgrading.md one too, and the
#      files that must spell it out (the Dockerfile's label default, the kustomizations' image tag) say the same;
#   4. every Markdown table row is part of a table (a row cut off from its header renders as plain text).
# Usage: scripts/check-docs.sh     Exit status: 0 when every check passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import glob, os, re, subprocess, sys
fails = 0
def ok(m): print("  ok    " + m)
def fail(m):
    global fails
    fails += 1
    print("  FAIL  " + m)

# 1. Words of the development process. A numbered step of a user's procedure ("go to step 5") is the product's;
#    a step that is a change ("steps 30–34 below", "step 18 of benchmarks.md") is not.
process = re.compile(
    r"\b(landing|milestone)s?\b|\bissue #?\d+|\bsteps? \d+(?:[-–]\d+)? of (?:the )?(?:plan|work)"
    r"|\bsteps? \d+(?:[-–]\d+)? (?:below|above|together)\b|\bsteps? \d+(?:[-–]\d+)? of \[?(?:docs/)?(?:benchmarks|load)\.md"
    r"|\brounds? of (?:fixes|work)\b|\bhelper sessions?\b|\bsession notes?\b|\breview session\b"
    r"|\bseeds? \d{3}\b|\bthe seed's\b|\bdeliverable \d",
    re.I)
paths = ["README.md", "CHANGELOG.md", "Package.swift"]
for top in ("docs", "deploy", "scripts", "Config", "Sources", "Benchmarks"):
    for path in glob.glob(top + "/**/*", recursive=True):
        if os.path.isfile(path) and not path.endswith((".pem", ".der", ".jwks")):
            paths.append(path)
skipped = ("scripts/check-docs.sh",)  # it names the words it looks for
found = []
for path in sorted(paths):
    if path in skipped:
        continue
    try:
        text = open(path, encoding="utf-8").read()
    except (UnicodeDecodeError, IsADirectoryError):
        continue
    for number, line in enumerate(text.splitlines(), 1):
        if process.search(line):
            found.append("%s:%d: %s" % (path, number, line.strip()[:100]))
if found:
    for f in found:
        print("        " + f)
    fail("%d line(s) speak of the development process instead of the product" % len(found))
else:
    ok("no user-facing text, script or comment speaks of the development process (%d files)" % len(paths))

# 2. Every rejection reason has a row in troubleshooting.md.
def source(pattern):
    return "\n".join(open(p).read() for p in glob.glob("Sources/**/*.swift", recursive=True) if re.search(pattern, open(p).read()))
reasons = set(re.findall(r'RejectionReason\(\s*code: "([a-z_]+)"', source(r"struct RejectionReason")))
metrics = source(r"static let gatewayReasons")
block = re.search(r"static let gatewayReasons = \[(.*?)\]", metrics, re.S).group(1)
reasons |= set(re.findall(r'"([a-z_0-9]+)"', block))
def refusal_cases(type_name, prefix):
    text = source(r"struct %s\b" % type_name)
    body = re.search(r"enum Refusal[^{]*\{(.*?)\n    \}", text, re.S).group(1)
    names = set()
    for name, raw in re.findall(r"case (\w+)(?: = \"([a-z_]+)\")?", body):
        names.add(prefix + (raw or name))
    return names
reasons |= refusal_cases("TokenPageCodeKey", "token_page_redeem_")
reasons |= refusal_cases("TokenPageConfirmationKey", "token_page_confirm_")
page = open("docs/troubleshooting.md").read()
rows = set(re.findall(r"^\| `([a-z_0-9-]+)` \|", page, re.M))
missing = sorted(reasons - rows)
if len(reasons) < 60:
    fail("found only %d reasons in the sources: the patterns above no longer match the code" % len(reasons))
elif missing:
    fail("docs/troubleshooting.md has no row for: %s" % ", ".join(missing))
else:
    ok("docs/troubleshooting.md has a row for each of the %d rejection reasons in the sources" % len(reasons))

# 3. The version is documented.
version = re.search(r'public static let string = "([^"]+)"', open("Sources/TokengateVersion/TokengateVersion.swift").read()).group(1)
changelog = open("CHANGELOG.md").read()
if re.search(r"^## \[%s\] - \d{4}-\d{2}-\d{2}$" % re.escape(version), changelog, re.M) and "## [Unreleased]" in changelog:
    ok("CHANGELOG.md: [Unreleased] and [%s] with its date" % version)
else:
    fail("CHANGELOG.md lacks [Unreleased] or a dated [%s] section" % version)
if re.search(r"^## %s\b" % re.escape(version), open("docs/upgrading.md").read(), re.M):
    ok("docs/upgrading.md: a section for %s" % version)
else:
    fail("docs/upgrading.md has no section for %s" % version)
# The formats that cannot read the version from the source (a Dockerfile's label default, kustomize's image tag)
# hold a copy: it must be the same.
copies = {
    "deploy/docker/Dockerfile": r"^ARG IMAGE_VERSION=(\S+)$",
    "deploy/kubernetes/base/kustomization.yaml": r'^\s*newTag: "?([^"\s]+)"?$',
    "deploy/kubernetes/overlays/production/kustomization.yaml": r'^\s*newTag: "?([^"\s]+)"?$',
}
stale = []
for path, pattern in copies.items():
    found_versions = re.findall(pattern, open(path).read(), re.M)
    if found_versions != [version]:
        stale.append("%s: %s" % (path, ", ".join(found_versions) or "no version"))
if stale:
    fail("copies of the version differ from %s: %s" % (version, "; ".join(stale)))
else:
    ok("the image definition and the kustomizations name %s" % version)

# 4. Every table row belongs to a table: a row after a blank line or a paragraph, without a header and a
#    |---| line, renders as plain text (the upstream tls.* rows once did, cut off from their table).
stray = []
for path in ["README.md", "CHANGELOG.md"] + sorted(glob.glob("docs/**/*.md", recursive=True)) + sorted(glob.glob("deploy/**/*.md", recursive=True)):
    lines = open(path, encoding="utf-8").read().splitlines()
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            continue
        starts_table = i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1])
        if not starts_table and not (i > 0 and lines[i - 1].startswith("|")):
            stray.append("%s:%d: %s" % (path, i + 1, line[:80]))
if stray:
    for s_ in stray:
        print("        " + s_)
    fail("%d table row(s) outside a table" % len(stray))
else:
    ok("every Markdown table row is part of a table with a header")
sys.exit(1 if fails else 0)
PY
