#!/usr/bin/env bash
# Install a CPU Vulkan driver for ManiSkill3 (env_type: maniskill), which starts its renderer
# through Vulkan even for state observations: Mesa 25's lavapipe. Debian 12 (bookworm) ships
# Mesa 22, which ManiSkill3's renderer refuses, so there it comes from bookworm-backports;
# Debian 13 has Mesa 25. Skipped when Mesa 25 or newer is installed (safe to rerun). Needs
# root (or sudo) and apt.
set -euo pipefail
installed=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
if [ -n "$installed" ] && [ "${installed%%.*}" -ge 25 ] 2>/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "error: ManiSkill3 needs Mesa 25's Vulkan driver; install it as root:" >&2
    echo "  apt-get install mesa-vulkan-drivers libvulkan1   (Debian 12: -t bookworm-backports)" >&2
    exit 1
  fi
fi
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
target=()
if [ "$codename" = "bookworm" ]; then
  list=/etc/apt/sources.list.d/debian-backports.sources
  if [ ! -f "$list" ]; then
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" \
      "Suites: bookworm-backports" "Components: main" \
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" | $SUDO tee "$list" >/dev/null
  fi
  target=(-t bookworm-backports)
fi
echo "installing Mesa's Vulkan driver for ManiSkill3 (Debian packages, about a minute)" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${target[@]}" \
  mesa-vulkan-drivers libvulkan1 >/dev/null
