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

"""Rate error against ground truth, and coverage when RMIDs run short.

On the emulated reference host (192 RMIDs, 8 CLOSIDs: 184 RMIDs for
monitoring groups), 250 monitored instances share bandwidth groups, so
the agent rotates monitoring groups. Every monitoring group the agent
creates gets a constant, known rate per L3 domain injected through the
emulator's control socket (a different rate for each instance), so each
reported rate can be compared with the truth.

Reports the relative error of every reported rate (median, p95, max;
target within 1%), the coverage per sample (share of monitored instances
with a value), the window coverage (share with a monitoring group), and
how long it took until every instance had been measured at least once.
Needs root and /dev/fuse.

Run::

    python benchmarks/agent_rates.py [--instances 250] [--seconds 40]
"""

import argparse
import statistics
import time

from agent_common import EmulatedHost  # noqa: I100
from agent_common import shared
from agent_common import summary

TOTAL = 'mbm_total_bytes'
LOCAL = 'mbm_local_bytes'


def truth(index):
    """Injected (domain 0, domain 1) bytes/s of instance ``index``."""
    base = 1.0e7 * (1 + index % 37)
    return base, base / 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--instances', type=int, default=250)
    parser.add_argument('--seconds', type=float, default=40.0)
    parser.add_argument('--rotation', type=float, default=4.0)
    args = parser.parse_args()

    env = EmulatedHost(rotation_interval=args.rotation, sample_interval=1.0)
    try:
        index = {}
        for i in range(args.instances):
            index[env.boot(shared(10 * (i % 5 + 1)), vcpus=1)] = i
        injected = set()
        errors, coverage, window = [], [], []
        first_value = {}
        start = time.monotonic()
        while time.monotonic() - start < args.seconds:
            env.agent.tick()
            for uuid, place in env.agent.placements.items():
                if place.counters is None:
                    continue
                # A group made again (rotation) starts with new counters.
                key = env.agent._source_key(place.counters)
                if key in injected:
                    continue
                group, mon = place.counters
                path = '/'.join(p for p in (group, 'mon_groups' if mon
                                            else None, mon) if p)
                for dom, rate in enumerate(truth(index[uuid])):
                    env.client.set_rate(path, rate, domain=dom,
                                        event=TOTAL)
                    env.client.set_rate(path, rate / 4, domain=dom,
                                        event=LOCAL)
                injected.add(key)
            doc = env.agent.sample()
            now = time.monotonic() - start
            coverage.append(doc['host']['coverage'])
            window.append(doc['host']['mon_coverage'])
            for uuid, inst in doc['instances'].items():
                got = inst['mbm_total_bps']
                if got is None:
                    continue
                want = sum(truth(index[uuid]))
                errors.append(abs(got - want) / want)
                first_value.setdefault(uuid, now)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - start - now)))
        host = doc['host']
        print('instances %d monitored, RMID budget for monitoring groups '
              '%d, rotating %s, rotation every %.0f s' % (
                  host['monitored'], host['mon_budget'], host['rotating'],
                  args.rotation))
        print('rate error vs injected ground truth, %%: %s over %d '
              'readings' % (summary(errors, 100, '%.3f'), len(errors)))
        print('coverage per sample (monitored instances with a value): '
              'mean %.2f, min %.2f (after the first rotation)' % (
                  statistics.mean(coverage[3:] or coverage),
                  min(coverage[3:] or coverage)))
        print('window coverage (instances with a monitoring group): '
              '%.2f' % statistics.mean(window))
        measured = len(first_value)
        print('instances measured at least once: %d of %d; the last after '
              '%.0f s' % (measured, args.instances,
                          max(first_value.values()) if first_value else 0))
        ok = errors and max(errors) < 0.01
        print('target (every rate within 1%%): %s' % (
            'met' if ok else 'NOT met'))
        return 0 if ok else 1
    finally:
        env.close()


if __name__ == '__main__':
    raise SystemExit(main())
