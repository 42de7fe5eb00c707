# hcasim-test: nodes=2 timeout=900 topology=fat-tree fabric-arg=--lmc=1 include=28-fabric-fattree.sh
# The checks of 28-fabric-fattree.sh with the fabric's built-in SM and SA
# managing the fat tree (it finds the spines and leaf1 behind leaf0's
# links, routes min-hop) and LMC 1: each HCA port has two LIDs, and
# ibtracert shows them routed through different spines.
