# hcasim-test: nodes=2 timeout=600 ci=0 kernel=sid include=kernel-probe.inc
# Debian unstable's current kernel package (7.2, split into linux-binary,
# linux-modules and linux-base) booted on the Debian 12 image through
# --kernel/--modules; its stock mlx5 drivers on the device. The checks are
# in kernel-probe.inc.
finish
