import sys

from hcasim.cli import main

sys.exit(main())
