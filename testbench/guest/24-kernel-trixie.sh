# hcasim-test: nodes=2 timeout=600 ci=0 kernel=trixie include=kernel-probe.inc
# Debian 13's current kernel package (6.12) booted on the Debian 12 image
# through --kernel/--modules; its stock mlx5 drivers on the device. The
# checks are in kernel-probe.inc.
finish
