#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# "meson install --destdir" of the build into a temp dir (nothing is
# written outside it but meson's install log in the build dir), then checks
# that every installed piece is there: the daemon, the library and its
# headers, the .pc, the units, the modules-load.d file, the man pages (when
# this build makes them), the example config and the exclusive mode's
# modprobe.d example. Then builds a small program against the installed .pc
# (PKG_CONFIG_SYSROOT_DIR) and runs it with the installed library, and
# checks the installed units name the installed daemon.
#
# Environment (set by meson): MESON BUILD_ROOT CC_CMD SANITIZE PROBE_SRC
# MAN_PAGES (the pages this build makes, e.g. "rdmacm-mux.8 ...", or empty).
set -euo pipefail

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

fail() {
	echo "not ok: $*" >&2
	exit 1
}

"$MESON" install -C "$BUILD_ROOT" --destdir "$dest" --no-rebuild --quiet \
	>"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log" >&2
	fail "meson install --destdir failed"
}
echo "ok: meson install --destdir $dest"

# Where meson says each file goes ("meson introspect --installed"); every
# one of them must be in the DESTDIR, and the pieces below must be among them.
"$MESON" introspect --installed "$BUILD_ROOT" >"$tmp/installed.json"
python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1])).values()))' \
	"$tmp/installed.json" | sort -u >"$tmp/installed"
while IFS= read -r f; do
	[[ -e $dest$f ]] || fail "meson installs $f but it is not in the DESTDIR"
done <"$tmp/installed"
echo "ok: all $(wc -l <"$tmp/installed") files meson installs are in the DESTDIR"

where() { # path-suffix, what: sets $hit to the one installed path ending in /suffix
	hit=$(grep -E "/$1\$" "$tmp/installed" || true)
	[[ -n $hit ]] || fail "$2 is not installed (no */$1)"
	[[ $(wc -l <<<"$hit") == 1 ]] || fail "$2 is installed twice: $hit"
	echo "ok: $2: $hit"
}

where 'sbin/rdmacm-mux' "the daemon"
[[ -x $dest$hit ]] || fail "the installed daemon is not executable"
sbindir=$(dirname "$hit")
where 'librdmacm-mux\.so\.1\.[0-9.]*' "the library"
libdir=$(dirname "$hit")
lib_file_version=${hit##*/librdmacm-mux.so.}
for link in librdmacm-mux.so.1 librdmacm-mux.so; do
	[[ -L $dest$libdir/$link ]] || fail "$libdir/$link is missing"
done
where 'rdmacm-mux/rdmacm-mux\.h' "the client header"
includedir=$(dirname "$(dirname "$hit")")
where 'rdmacm-mux/rdmacm-mux-proto\.h' "the wire header"
where 'pkgconfig/rdmacm-mux\.pc' "the pkg-config file"
pcdir=$(dirname "$hit")
for u in rdmacm-mux.service rdmacm-mux@.service rdmacm-mux@.socket \
	rdmacm-mux-control@.socket; do
	where "systemd/system/${u//./\\.}" "unit $u"
	unitdir=$(dirname "$hit")
done
# The ib_cm ban is an example (the exclusive mode), never in effect as
# installed: nothing goes into a modprobe.d directory kmod reads.
where 'examples/modprobe\.d/rdmacm-mux-exclusive\.conf' "the exclusive mode's modprobe.d example"
grep -qx 'install ib_cm /bin/false' "$dest$hit" ||
	fail "the exclusive mode's example does not keep ib_cm away"
if grep -E '/lib/modprobe\.d/|/etc/modprobe\.d/' "$tmp/installed"; then
	fail "the install puts a file where kmod reads it: the host would lose ib_cm"
fi
where 'modules-load\.d/rdmacm-mux\.conf' "the modules-load.d file"
grep -qx 'ib_umad' "$dest$hit" || fail "the modules-load.d file does not load ib_umad"
where 'examples/rdmacm-mux\.conf' "the example config"
# node_exporter's example pair: documentation, never among the units, and
# the service runs the installed rdmacm-muxctl.
where 'examples/rdmacm-mux-metrics@\.timer' "the example timer"
where 'examples/rdmacm-mux-metrics@\.service' "the example service"
grep -q " $sbindir/rdmacm-muxctl " "$dest$hit" ||
	fail "the example service does not run $sbindir/rdmacm-muxctl"
grep -q '@[A-Za-z_]*@' "$dest$hit" && fail "the example service has an unsubstituted @VARIABLE@"
grep -q 'systemd/system/rdmacm-mux-metrics@' "$tmp/installed" &&
	fail "the example units are installed as units"
# libvirt's example hook: documentation, executable, never a hook as
# installed (libvirt runs what is in /etc/libvirt/hooks).
where 'examples/libvirt/qemu-hook' "the libvirt hook example"
[[ -x $dest$hit ]] || fail "the libvirt hook example is not executable"
where 'examples/libvirt/domain\.xml' "the libvirt domain example"
where 'examples/libvirt/apparmor-libvirt-qemu' "the AppArmor snippet example"
grep -q '/libvirt/hooks/' "$tmp/installed" && fail "the install puts a hook where libvirt runs it"
for page in $MAN_PAGES; do
	where "man[0-9]/${page//./\\.}" "man page $page"
	[[ -s $dest$hit ]] || fail "man page $hit is empty"
done
if [[ " $MAN_PAGES " == *" librdmacm-mux.3 "* ]]; then
	# man rdmacm_mux_open_ex finds librdmacm-mux(3).
	where 'man3/rdmacm_mux_open_ex\.3' "the page name of a 1.2 call"
	grep -qx '.so man3/librdmacm-mux.3' "$dest$hit" ||
		fail "$hit does not point at librdmacm-mux(3)"
fi

# The installed units start the installed daemon.
for u in rdmacm-mux.service rdmacm-mux@.service; do
	grep -qE "[= ]$sbindir/rdmacm-mux " "$dest$unitdir/$u" ||
		fail "$u does not run $sbindir/rdmacm-mux"
	grep -q '@[A-Za-z_]*@' "$dest$unitdir/$u" &&
		fail "$u has an unsubstituted @VARIABLE@"
done
echo "ok: the units run $sbindir/rdmacm-mux"

# A program built only from what was installed.
export PKG_CONFIG_PATH=$dest$pcdir PKG_CONFIG_LIBDIR=$dest$pcdir
export PKG_CONFIG_SYSROOT_DIR=$dest
cflags=$(pkg-config --cflags rdmacm-mux)
libs=$(pkg-config --libs rdmacm-mux)
[[ $cflags == *"$dest$includedir"* ]] || fail "pkg-config --cflags ($cflags) is not inside the install"
[[ $libs == *"$dest$libdir"* ]] || fail "pkg-config --libs ($libs) is not inside the install"
san=()
[[ $SANITIZE != none && -n $SANITIZE ]] && san=("-fsanitize=$SANITIZE")
# shellcheck disable=SC2086 # CC_CMD, cflags and libs are word lists
$CC_CMD "${san[@]}" -std=gnu11 -Wall -Werror $cflags -o "$tmp/probe" "$PROBE_SRC" $libs ||
	fail "cannot build a program against the installed rdmacm-mux.pc"
echo "ok: built a program with pkg-config --cflags --libs rdmacm-mux ($libs)"

out=$(LD_LIBRARY_PATH=$dest$libdir "$tmp/probe" "$tmp/no-such-socket") ||
	fail "the program built against the installed library failed: $out"
echo "$out" | sed 's/^/# /'
loaded=$(sed -n 's/^loaded: //p' <<<"$out")
[[ $loaded == "$dest$libdir/"librdmacm-mux.so* ]] ||
	fail "the program loaded '$loaded', not the installed library"
echo "ok: it ran against the installed library"

# One version everywhere: the .pc's (what a build system checks), the
# header's macros, the running library's and the .so's file name.
modversion=$(pkg-config --modversion rdmacm-mux)
header=$(sed -n 's/^header: //p' <<<"$out")
library=$(sed -n 's/^library: //p' <<<"$out")
[[ $modversion == "$header" && $modversion == "$library" && $modversion == "$lib_file_version" ]] ||
	fail "versions differ: pkg-config $modversion, header $header, library $library, file $lib_file_version"
pkg-config --atleast-version=1.2 rdmacm-mux || fail "pkg-config: rdmacm-mux $modversion is not >= 1.2"
echo "ok: rdmacm-mux.pc, rdmacm-mux.h, rdmacm_mux_version() and the .so say $modversion"
