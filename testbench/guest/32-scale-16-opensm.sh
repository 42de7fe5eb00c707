# hcasim-test: nodes=16 smp=1 mem=512M timeout=1800 ci=0 sm=0 env=HCASIM_OPENSM=1 include=31-scale-16.sh
# The checks of 31-scale-16.sh with the fabric's SM off and opensm in guest 0
# managing the 16 ports.
