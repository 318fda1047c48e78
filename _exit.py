import sys, os, time, atexit
atexit.register(lambda: print(f"atexit last at cpu {time.process_time():.3f}", file=sys.stderr))
from oop.cli import main
rc = main(sys.argv[2:])
atexit.register(lambda: print(f"atexit first at cpu {time.process_time():.3f}", file=sys.stderr))
print(f"main done at cpu {time.process_time():.3f}", file=sys.stderr)
import threading; print(threading.enumerate(), file=sys.stderr)
print(atexit._ncallbacks(), file=sys.stderr)
