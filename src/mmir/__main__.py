import sys

from mmir.cli import main

sys.exit(main())
