"""``python3 -m radium_interposer``: print the interposer's report as JSON."""

import json
import sys

from radium_interposer import report

json.dump(report(), sys.stdout, indent=2, sort_keys=True)
sys.stdout.write("\n")
