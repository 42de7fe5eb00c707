# hcasim-test: nodes=2 timeout=900 sm=0 env=HCASIM_OPENSM=1 include=05-fabric-ud.sh
# The checks of 05-fabric-ud.sh with the fabric's SM off and a real opensm in
# guest 0 managing the switch and both HCAs.
