#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Faults under load, for longer than CI runs them.

::

    sudo .tox/functional/bin/python tools/chaos.py --seed 7 --rounds 40
    sudo .tox/functional/bin/python tools/chaos.py --seeds 20 --rounds 10

Each seed is one run of tests/functional/agent/chaos.py: an emulated host
with hundreds of fake instances, the agent in its own process, churn and
faults every round, then the checks (no orphaned group, no misplaced
thread, no foreign group touched, rates within the host's ceiling, a
parseable state file after every step). A failing seed is printed with the
command that runs it again; its directory (emulator and agent logs) is
kept. Needs root and /dev/fuse. Exit status 1 if any seed failed.
"""

import argparse
import os
import random
import sys
import warnings

warnings.simplefilter('ignore')
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..'))

from tests.functional.agent import chaos  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seed', type=int,
                        help='first seed (default: a random one)')
    parser.add_argument('--seeds', type=int, default=1,
                        help='how many consecutive seeds to run')
    parser.add_argument('--rounds', type=int, default=30)
    parser.add_argument('--instances', type=int, default=300)
    parser.add_argument('--churn', type=int, default=15,
                        help='most creates, destroys and changes a round')
    parser.add_argument('--settle-ticks', type=int, default=3)
    parser.add_argument('--sample-every', type=int, default=1,
                        help='publish the state file every N rounds')
    parser.add_argument('-v', '--verbose', action='store_true',
                        help='print every round and fault')
    args = parser.parse_args(argv)
    first = args.seed if args.seed is not None else random.randrange(
        1, 10 ** 6)
    failed = []
    totals = {}
    for seed in range(first, first + args.seeds):
        run = chaos.Chaos(seed, rounds=args.rounds,
                          instances=args.instances, churn=args.churn,
                          settle_ticks=args.settle_ticks,
                          sample_every=args.sample_every,
                          log=print if args.verbose else None)
        report = run.run()
        print(report.summary(), flush=True)
        for text in report.violations:
            print('  ' + text)
        for name, count in report.faults.items():
            totals[name] = totals.get(name, 0) + count
        if not report.ok:
            failed.append(seed)
    print('%d runs x %d rounds; faults survived: %s' % (
        args.seeds, args.rounds, ', '.join(
            '%s %d' % kv for kv in sorted(totals.items()))))
    for seed in failed:
        print('FAILED seed %d: tools/chaos.py --seed %d --rounds %d '
              '--instances %d --churn %d -v' % (
                  seed, seed, args.rounds, args.instances, args.churn))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
