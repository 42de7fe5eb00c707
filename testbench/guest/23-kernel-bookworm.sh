# hcasim-test: nodes=2 timeout=600 ci=0 kernel=bookworm include=kernel-probe.inc
# Debian 12's current kernel package (6.1) booted as a user kernel through
# --kernel/--modules: the same kernel line as the image's, through the path
# a user's own kernel takes. The checks are in kernel-probe.inc.
finish
