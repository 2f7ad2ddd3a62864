#!/usr/bin/env bash
# Builds the release artifacts of the version in Sources/TokengateVersion/TokengateVersion.swift into dist/:
#
#   dist/tokengate-VERSION-linux-ARCH.tar.gz   bin/tokengate, the man pages, bash/zsh/fish completions, the
#                                              systemd unit and sysusers file, example configurations, docs
#   dist/tokengate_VERSION_DEBARCH.deb         the same as a Debian package (dpkg-deb): /usr/bin/tokengate, the
#                                              unit in /lib/systemd/system, the tokengate user from sysusers.d,
#                                              man pages, completions, /etc/tokengate; Depends from the binary
#   dist/tokengate-VERSION.Dockerfile          deploy/docker/Dockerfile with the OCI labels' version, revision
#                                              and creation time filled in (build it with the command printed)
#   dist/SHA256SUMS
#
# Usage: scripts/release.sh [--binary PATH] [--out DIR] [--allow-unpackaged-libraries] [--fast]
#   --binary PATH   package this tokengate binary instead of building one with
#                   `swift build -c release --product tokengate --static-swift-stdlib` (the test suite packages
#                   its debug binary this way, to check the package's contents without a release build)
#   --out DIR       write the artifacts there instead of dist/
#   --allow-unpackaged-libraries
#                   accept a binary that links a shared library no Debian package provides (a debug build's
#                   Swift runtime); such a .deb installs, but runs only where that library is
#   --fast          compress with gzip -1 instead of xz -6 and gzip -9 (the suite's check of a 60 MB debug binary)
# Needs: swift (the man page's generator, and the build unless --binary), dpkg-deb, dpkg, objdump and strip
# (binutils), gzip, tar.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
export PATH="/opt/swift/usr/bin:$PATH"

binary="" out="$repo/dist" allow_unpackaged=0 deb_compression=(-Zxz -z6) gzip_level=-9
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$(realpath "$2")"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --allow-unpackaged-libraries) allow_unpackaged=1; shift ;;
    --fast) deb_compression=(-Zgzip -z1); gzip_level=-1; shift ;;
    -h | --help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "release: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

# The one place the version is written.
version="$(sed -n 's/^ *public static let string = "\([0-9][0-9.]*[0-9A-Za-z.+-]*\)"$/\1/p' Sources/TokengateVersion/TokengateVersion.swift)"
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]]; then
  echo "release: no semantic version in Sources/TokengateVersion/TokengateVersion.swift" >&2; exit 1
fi
if ! grep -q "^## \[$version\]" CHANGELOG.md; then
  echo "release: CHANGELOG.md has no section for $version" >&2; exit 1
fi
revision="$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)"
created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
deb_arch="$(dpkg --print-architecture)"
arch="$(uname -m)"

if [ -z "$binary" ]; then
  swift build -c release --product tokengate --static-swift-stdlib
  binary="$(swift build -c release --show-bin-path)/tokengate"
fi
[ -x "$binary" ] || { echo "release: $binary is not an executable" >&2; exit 1; }
reported="$("$binary" --version)"
if [ "$reported" != "$version" ]; then
  echo "release: $binary says it is $reported, the source says $version (stale build?)" >&2; exit 1
fi

stage="$(mktemp -d /tmp/tokengate-release.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

# The packaged copy without its DWARF debug information (what Debian's dh_strip moves into a -dbgsym package):
# a third of a release build's size. The symbol table stays, so a crash's backtrace still names functions.
install -m 0755 "$binary" "$stage/tokengate"
strip --strip-debug "$stage/tokengate"

# The man page and the completions, generated from the binary being packaged so they never drift from its CLI.
# The man page by swift-argument-parser's generate-manual, the tool behind the parser's GenerateManual plugin, built
# from the same package checkout: it reads the binary's --experimental-dump-help. (Not the plugin itself: it
# rebuilds every product of the package first, and in the release configuration replaces the
# --static-swift-stdlib build with a dynamically linked one.)
mkdir -p "$stage/generated/man" "$stage/generated/completions" "$stage/generate-manual"
git_date="$(git log -1 --format=%cs 2> /dev/null || date -u +%Y-%m-%d)"
swift build --product generate-manual > "$stage/generate-manual.log" 2>&1 \
  || { cat "$stage/generate-manual.log" >&2; echo "release: building generate-manual failed" >&2; exit 1; }
"$(swift build --show-bin-path)/generate-manual" "$binary" --date "$git_date" --output-directory "$stage/generate-manual"
# generate-manual copies a discussion's blank lines as they are, which mdoc reads as a warning; .Pp is its
# paragraph break.
sed 's/^$/.Pp/' "$stage/generate-manual/tokengate.1" > "$stage/generated/man/tokengate.1"
"$binary" --generate-completion-script bash > "$stage/generated/completions/tokengate.bash"
"$binary" --generate-completion-script zsh > "$stage/generated/completions/_tokengate"
"$binary" --generate-completion-script fish > "$stage/generated/completions/tokengate.fish"

# ---- tarball
name="tokengate-$version-linux-$arch"
tree="$stage/$name"
install -D -m 0755 "$stage/tokengate" "$tree/bin/tokengate"
install -d "$tree/share/man/man1" "$tree/share/completions" "$tree/share/tokengate/systemd" "$tree/share/tokengate/examples" "$tree/share/doc/tokengate"
install -m 0644 "$stage"/generated/man/*.1 "$tree/share/man/man1/"
install -m 0644 "$stage"/generated/completions/* "$tree/share/completions/"
install -m 0644 deploy/systemd/tokengate.service deploy/systemd/tokengate.socket deploy/systemd/tokengate.sysusers "$tree/share/tokengate/systemd/"
install -m 0644 deploy/systemd/tokengate.yaml "$tree/share/tokengate/examples/tokengate.yaml"
install -m 0644 Config/tokengate.yaml "$tree/share/tokengate/examples/tokengate.full.yaml"
install -m 0644 README.md CHANGELOG.md "$tree/share/doc/tokengate/"
cp -r docs "$tree/share/doc/tokengate/docs"
tarball="$out/$name.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$(git log -1 --format=%ct 2> /dev/null || date +%s)" \
  -C "$stage" -cf - "$name" | gzip "$gzip_level" -n > "$tarball"

# ---- .deb
root="$stage/deb"
install -D -m 0755 "$stage/tokengate" "$root/usr/bin/tokengate"
# The unit as shipped names /usr/local/bin (a hand-installed binary); a package installs into /usr/bin.
install -d "$root/lib/systemd/system"
sed 's|/usr/local/bin/tokengate|/usr/bin/tokengate|g' deploy/systemd/tokengate.service > "$root/lib/systemd/system/tokengate.service"
chmod 0644 "$root/lib/systemd/system/tokengate.service"
# Not enabled by the package: socket activation is the operator's choice (tokengate.socket says how).
install -m 0644 deploy/systemd/tokengate.socket "$root/lib/systemd/system/tokengate.socket"
install -D -m 0644 deploy/systemd/tokengate.sysusers "$root/usr/lib/sysusers.d/tokengate.conf"
install -d "$root/usr/share/man/man1"
for page in "$stage"/generated/man/*.1; do gzip -9n < "$page" > "$root/usr/share/man/man1/$(basename "$page").gz"; done
install -D -m 0644 "$stage/generated/completions/tokengate.bash" "$root/usr/share/bash-completion/completions/tokengate"
install -D -m 0644 "$stage/generated/completions/_tokengate" "$root/usr/share/zsh/vendor-completions/_tokengate"
install -D -m 0644 "$stage/generated/completions/tokengate.fish" "$root/usr/share/fish/vendor_completions.d/tokengate.fish"
install -D -m 0644 deploy/systemd/tokengate.yaml "$root/usr/share/doc/tokengate/examples/tokengate.yaml"
install -m 0644 Config/tokengate.yaml "$root/usr/share/doc/tokengate/examples/tokengate.full.yaml"
gzip -9n < CHANGELOG.md > "$root/usr/share/doc/tokengate/changelog.gz"
install -m 0644 README.md "$root/usr/share/doc/tokengate/README.md"
cp -r docs "$root/usr/share/doc/tokengate/docs"
install -d -m 0755 "$root/etc/tokengate"

# Depends: the Debian package of every shared library the binary names (NEEDED), at the installed version or newer.
depends=()
missing=()
while read -r library; do
  # `libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (…)`; the dynamic loader is listed by its path alone.
  path="$(ldd "$binary" | awk -v lib="$library" '$1 == lib { print $3 } $1 ~ ("/" lib "$") { print $1 }' | head -1)"
  owner=""
  if [ -n "$path" ]; then
    # Debian 12 merges /lib into /usr/lib: dpkg knows a library by one of the two names.
    for candidate in "$path" "$(realpath "$path")"; do
      [ -n "$owner" ] || owner="$(dpkg -S "$candidate" 2> /dev/null | head -1 | cut -d: -f1 || true)"
    done
  fi
  if [ -z "$owner" ]; then missing+=("$library"); continue; fi
  installed="$(dpkg-query -W -f='${Version}' "$owner" 2> /dev/null | sed 's/-[^-]*$//')"
  depends+=("$owner (>= ${installed:-0})")
done < <(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }')
if [ "${#missing[@]}" -gt 0 ] && [ "$allow_unpackaged" = 0 ]; then
  echo "release: no Debian package provides ${missing[*]} (build with --static-swift-stdlib, or pass --allow-unpackaged-libraries)" >&2
  exit 1
fi
depends_line="$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')"
installed_size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: tokengate
Version: $version
Architecture: $deb_arch
Maintainer: tokengate maintainers <tokengate@localhost>
Installed-Size: $installed_size
Depends: $depends_line, adduser | systemd
Section: net
Priority: optional
Description: edge reverse proxy that lets a website's mobile apps in with tokens
 tokengate sits in front of a website's backend APIs and forwards only requests
 that carry a valid token minted by the website's token page, with the user's
 password-changed cutoff enforced. TLS via OpenSSL 3, HTTP/1.1 and HTTP/2.
CONTROL
# The tokengate system user (uid 10001, as in the container image) and its state directory; the unit is enabled
# by the operator once /etc/tokengate holds a configuration, keys and certificates. DPKG_ROOT is dpkg's
# installation root when it installs into another directory (`dpkg --root=DIR --force-script-chrootless`, as
# image builders do, and the test suite): the user goes into that root's /etc/passwd, and the host's systemd is
# left alone.
cat > "$root/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers > /dev/null 2>&1; then
    systemd-sysusers --root="${DPKG_ROOT:-/}" tokengate.conf
  elif [ -n "${DPKG_ROOT:-}" ]; then
    echo "tokengate: no systemd-sysusers to create the tokengate user in $DPKG_ROOT" >&2; exit 1
  elif ! getent passwd tokengate > /dev/null; then
    adduser --system --group --uid 10001 --home /var/lib/tokengate --no-create-home tokengate
  fi
  if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
fi
exit 0
POSTINST
cat > "$root/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop tokengate.service > /dev/null 2>&1 || true
fi
exit 0
PRERM
cat > "$root/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
POSTRM
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
deb="$out/tokengate_${version}_${deb_arch}.deb"
dpkg-deb --root-owner-group "${deb_compression[@]}" --build "$root" "$deb" > /dev/null

# ---- container image definition
dockerfile="$out/tokengate-$version.Dockerfile"
sed -e "s|^ARG IMAGE_VERSION=.*|ARG IMAGE_VERSION=$version|" \
  -e "s|^ARG IMAGE_REVISION=.*|ARG IMAGE_REVISION=$revision|" \
  -e "s|^ARG IMAGE_CREATED=.*|ARG IMAGE_CREATED=$created|" \
  deploy/docker/Dockerfile > "$dockerfile"

(cd "$out" && sha256sum "$(basename "$tarball")" "$(basename "$deb")" "$(basename "$dockerfile")" > SHA256SUMS)
echo "release: tokengate $version"
echo "  $tarball"
echo "  $deb"
echo "  $dockerfile   (docker build -f $dockerfile -t tokengate:$version .)"
echo "  $out/SHA256SUMS"
