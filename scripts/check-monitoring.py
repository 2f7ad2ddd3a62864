#!/usr/bin/env python3
"""Checks deploy/monitoring against a running gateway's /metrics exposition.

Usage: scripts/check-monitoring.py METRICS_FILE [RULES_YAML] [DASHBOARD_JSON] [DASHBOARD_RULES_OUT]

Prints "ok ..." / "FAIL ..." lines (scripts/validate-deploy.sh counts the FAIL ones):
  - every family in the exposition has one # HELP and one # TYPE line, before its samples;
  - every metric name an alert rule's expr or a dashboard query uses is a sample name the gateway exposes
    (`up` is Prometheus's own: allowed);
  - each rule has alert, expr, and a summary annotation; each dashboard panel query has an expr.
With DASHBOARD_RULES_OUT, the dashboard's queries are also written there as recording rules (Grafana's
variables replaced by values), so that `promtool check rules` parses them as PromQL.
"""
import json
import re
import sys

import yaml

NAME = re.compile(r"(?<![A-Za-z0-9_:])((?:tokengate|process)_[A-Za-z0-9_]+|up)(?![A-Za-z0-9_:(])")
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{|\s)")


def exposition(path):
    helps, types, samples, problems = {}, {}, set(), []
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not parts[3]:
                problems.append("line %d: %s without text" % (number, parts[1]))
                continue
            table = helps if parts[1] == "HELP" else types
            if parts[2] in table:
                problems.append("line %d: a second # %s for %s" % (number, parts[1], parts[2]))
            table[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if not match:
            problems.append("line %d: not a sample: %r" % (number, line[:80]))
            continue
        name = match.group(1)
        samples.add(name)
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
                family = name[: -len(suffix)]
        if family not in types or family not in helps:
            problems.append("line %d: sample %s before (or without) the # HELP and # TYPE of %s" % (number, name, family))
    return helps, types, samples, problems


def main():
    metrics = sys.argv[1]
    rules_path = sys.argv[2] if len(sys.argv) > 2 else "deploy/monitoring/tokengate-alerts.yaml"
    dashboard_path = sys.argv[3] if len(sys.argv) > 3 else "deploy/monitoring/tokengate-dashboard.json"
    helps, types, samples, problems = exposition(metrics)
    if problems:
        for problem in problems[:10]:
            print("FAIL /metrics: " + problem)
    else:
        print("ok /metrics: %d families, each with # HELP and # TYPE before its samples" % len(types))

    used = {}  # name -> where
    rules = yaml.safe_load(open(rules_path, encoding="utf-8"))
    count = 0
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            count += 1
            if not rule.get("alert") or not rule.get("expr") or not (rule.get("annotations") or {}).get("summary"):
                print("FAIL %s: a rule without alert, expr or a summary annotation: %r" % (rules_path, rule)[:200])
                continue
            for name in NAME.findall(rule["expr"]):
                used.setdefault(name, "alert " + rule["alert"])
    print("ok %s: %d alert rules parse" % (rules_path, count))

    dashboard = json.load(open(dashboard_path, encoding="utf-8"))
    queries = 0
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            if not target.get("expr"):
                print("FAIL %s: panel %r has a target without expr" % (dashboard_path, panel.get("title")))
                continue
            queries += 1
            for name in NAME.findall(target["expr"]):
                used.setdefault(name, "panel " + repr(panel.get("title")))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        if variable.get("type") == "query" and text:
            for name in NAME.findall(text):
                used.setdefault(name, "variable " + variable["name"])
    print("ok %s: %d panel queries" % (dashboard_path, queries))
    if len(sys.argv) > 4:
        def concrete(expr):
            return (expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
                    .replace("$job", "tokengate").replace("$instance", ".*"))
        exprs = [concrete(t["expr"]) for p in dashboard.get("panels", []) for t in p.get("targets", []) if t.get("expr")]
        rules_out = {"groups": [{"name": "dashboard", "rules": [
            {"record": "tokengate_dashboard:query%d" % i, "expr": e} for i, e in enumerate(exprs)]}]}
        with open(sys.argv[4], "w", encoding="utf-8") as out:
            yaml.safe_dump(rules_out, out)

    missing = sorted(name for name in used if name != "up" and name not in samples)
    for name in missing:
        print("FAIL %s uses %s, which the gateway's /metrics does not expose" % (used[name], name))
    if not missing:
        print("ok every metric the alert rules and the dashboard use is on /metrics (%d names: %s)"
              % (len(used), ", ".join(sorted(used))))


if __name__ == "__main__":
    main()
