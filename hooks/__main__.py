import sys

from radium.hooks.main import main

sys.exit(main())
