#!/usr/bin/env bash
# crash(8) as built for arm64, on an arm64 guest's dump: Debian ships crash on amd64 built to
# read x86_64 dumps only, so this runs Debian's arm64 package of it (and its libraries,
# unpacked into a directory, never installed) under qemu-aarch64. Reads crash commands on
# stdin; the guest directory (`kcrash-harness linux-arm64`) is the first argument.
#
#   printf 'sys\nps\nbt\n' | kcrash/benches/crash_arm64.sh /var/cache/kcrash-ci/linux-guest-arm64/5.10.0-32-arm64
#
# Emulated, it takes a minute or more where the native build takes seconds: its answers are
# worth comparing, not its times.
set -euo pipefail
guest=${1:?usage: crash_arm64.sh GUEST_DIR < COMMANDS}
root=${CRASH_ARM64_ROOT:-/var/cache/kcrash-ci/crash-arm64}
if [ ! -x "$root/usr/bin/crash" ]; then
    command -v qemu-aarch64 >/dev/null || apt-get install -y qemu-user >&2
    dpkg --print-foreign-architectures | grep -qx arm64 || {
        dpkg --add-architecture arm64 && apt-get update >&2
    }
    debs=$(mktemp -d)
    (cd "$debs" && apt-get download crash:arm64 libc6:arm64 libgcc-s1:arm64 liblzo2-2:arm64 \
        libncursesw6:arm64 libsnappy1v5:arm64 libstdc++6:arm64 libtinfo6:arm64 libzstd1:arm64 \
        zlib1g:arm64 >&2)
    mkdir -p "$root"
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$root"; done
    rm -rf "$debs"
fi
cd "$guest"
{ cat; echo q; } | qemu-aarch64 -L "$root" "$root/usr/bin/crash" -s vmlinux vmcore.elf
