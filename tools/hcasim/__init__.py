"""hcasim command line: setup, build, boot and run VMs, tests."""
