"""A training that only prints: every --period-s seconds for --iterations
iterations, one line with the iteration counter, time.monotonic() and
--pad bytes of padding (so that a pseudo-terminal nobody reads is full
within a fraction of a second), then "TICKER DONE".

After each print it appends "<i> <time.monotonic()>" to --progress (its
own file, so a test can follow it whatever happens to its stdout), then
"done <iterations>" at the end; an exception (EIO from print, say) is
written there as "error ..." before it propagates."""
import argparse
import os
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--progress", required=True)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--period-s", type=float, default=0.02)
    p.add_argument("--pad", type=int, default=1000)
    a = p.parse_args()
    pad = "." * a.pad
    with open(a.progress, "a", buffering=1) as prog:
        prog.write("start pid %d tty %d\n" % (os.getpid(), sys.stdout.isatty()))
        try:
            for i in range(a.iterations):
                print("tick %d t=%.6f %s" % (i, time.monotonic(), pad))
                prog.write("%d %.6f\n" % (i, time.monotonic()))
                time.sleep(a.period_s)
            print("TICKER DONE")
            sys.stdout.flush()
        except BaseException as e:
            prog.write("error %r\n" % (e,))
            raise
        prog.write("done %d\n" % a.iterations)


if __name__ == "__main__":
    main()
