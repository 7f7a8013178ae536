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

"""Watcher's upstream ``noisy_neighbor`` strategy on rdt-virt's meter.

:func:`run` takes the :class:`~rdt_virt.cloud.flow.Flow` of a cloud with
images (the flow's first step) and sets up what the strategy looks for
on one host: a ``watcher-priority`` high server working and a low one
idle for ``idle`` seconds, then the low one rebuilt as a noisy guest for
``noisy`` seconds, so that Gnocchi holds 5-minute means of
``cpu_l3_cache`` from before and after. It then runs an audit with the
strategy, unchanged, and reports what it did:

* an action plan that migrates the noisy server is applied and the move
  checked;
* an empty plan is explained from Watcher's own code: the decision
  engine's log must show the error that skipped every instance, and
  :mod:`.watcher_reads` shows what the strategy's datasource call returns
  on these measures.

It takes at least ``idle + noisy`` seconds (the strategy's granularity
is a fixed 300 s), which is why its test has a tox target of its own
(``tox -e watcher-upstream``).
"""

import json
import subprocess
import sys
import time

from rdt_virt.cloud import flow_watcher

STRATEGY = 'noisy_neighbor'
HIGH, LOW = 'nn-high', 'nn-low'
# The strategy sorts a host's instances by this metadata (a string; every
# instance of the host must have it) and reads the smallest first as the
# most important.
PRIORITY = {HIGH: '1', LOW: '9'}
PERIOD = 300
# The error Watcher 17.0.0 raises before reading any measure:
# noisy_neighbor.py passes the granularity both by position and by name
# to GnocchiHelper.get_instance_l3_cache_usage().
DEFECT = "got multiple values for argument 'granularity'"


def run(flow, idle=420, noisy=420):
    host = flow.CONTROLLED
    flow.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
            'rdt.upstream')
    for name, image in ((HIGH, 'rdt-work'), (LOW, 'rdt-idle')):
        flow.os('--os-compute-api-version', '2.74', 'server', 'create',
                '--flavor', 'rdt.upstream', '--image', image, '--nic',
                'none', '--host', host, '--property',
                'watcher-priority=' + PRIORITY[name], '--wait', name)
    flow.expect(all(flow._host_of(n) == host for n in (HIGH, LOW)),
                '%s (watcher-priority=1) and %s (9) run on %s' % (
                    HIGH, LOW, host))
    uuids = {n: flow._show(n)['id'] for n in (HIGH, LOW)}
    flow.out('  %d s with %s idle' % (idle, LOW))
    time.sleep(idle)
    flow.os('server', 'rebuild', '--image', 'rdt-burn', '--wait', LOW)
    flow.out('  %d s with %s noisy' % (noisy, LOW))
    time.sleep(noisy)
    series = {}
    for name, uuid in uuids.items():
        # The strategy's granularity (the test cloud also keeps 1-minute
        # means).
        flow.sh(flow.cloud.layout.tool('gnocchi'), 'measures', 'show',
                '--resource-id', uuid, '--refresh', '--granularity',
                str(flow_watcher.GRANULARITY), 'cpu_l3_cache')
        series[name] = [m['value'] for m in flow._gnocchi_measures(
            uuid, 'cpu_l3_cache', flow_watcher.GRANULARITY)]
    low, high = series[LOW], series[HIGH]
    flow.expect(len(low) >= 2 and low[-1] > low[0],
                "%s's cpu_l3_cache rose from %.0f to %.0f B since it "
                "turned noisy" % (LOW, low[0] if low else 0,
                                  low[-1] if low else 0))
    flow.out("  %s's cpu_l3_cache went from %.0f to %.0f B (%s)" % (
        HIGH, high[0], high[-1], 'fell' if high[-1] < high[0] else
        'did not fall') if len(high) >= 2 else
        '  %s has %d point(s)' % (HIGH, len(high)))

    log = flow.cloud.daemons.log_file('watcher-decision-engine')
    with open(log, 'rb') as f:
        f.seek(0, 2)
        mark = f.tell()
    _, text = flow.os('optimize', 'audit', 'create', '-g', STRATEGY, '-s',
                      STRATEGY, '-p', 'period=%d' % PERIOD, '-f', 'value',
                      '-c', 'UUID')
    audit = text.strip().splitlines()[0]
    flow_watcher._wait_status(flow, 'the audit', ('optimize', 'audit',
                                                  'show', audit),
                              ('SUCCEEDED',), ('FAILED', 'CANCELLED'))
    plans = flow.os('optimize', 'actionplan', 'list', '--audit', audit,
                    parse=True)
    flow.table('optimize', 'actionplan', 'list', '--audit', audit)
    flow.expect(len(plans) == 1, 'the audit made one action plan')
    plan = plans[0]['UUID']
    migrations = flow_watcher._migrations(flow, plan)
    if migrations:
        _apply(flow, plan, migrations, uuids, host)
    else:
        with open(log, 'rb') as f:
            f.seek(mark)
            engine = f.read().decode('utf-8', 'replace')
        _explain(flow, engine, uuids)
    flow.os('server', 'delete', '--wait', HIGH, LOW)


def _apply(flow, plan, migrations, uuids, host):
    flow.expect(len(migrations) == 1 and
                migrations[0]['Parameters'].get('resource_id') ==
                uuids[LOW], 'the plan migrates the noisy %s' % LOW)
    flow.os('optimize', 'actionplan', 'start', plan)
    flow_watcher._wait_status(flow, 'the action plan', (
        'optimize', 'actionplan', 'show', plan), ('SUCCEEDED',),
        ('FAILED', 'CANCELLED', 'SUPERSEDED'))
    flow.expect(flow._host_of(LOW) != host and flow._host_of(HIGH) == host,
                'the applier moved %s off %s' % (LOW, host))


def _explain(flow, engine, uuids):
    """No plan: show why, from the decision engine and Watcher's reads."""
    lines = [line for line in engine.splitlines()
             if DEFECT in line or 'Skipping the instance' in line]
    for line in lines[:6]:
        flow.out('  decision engine: ' + line.strip())
    skipped = sum('Skipping the instance' in line for line in lines)
    flow.expect(any(DEFECT in line for line in lines) and skipped >= 2,
                'no plan: the strategy skipped %d instance(s) after '
                'GnocchiHelper.get_instance_l3_cache_usage() raised '
                'TypeError (%s)' % (skipped, DEFECT))
    conf = flow.cloud.layout.etc('watcher', 'watcher.conf')
    argv = [sys.executable, '-m', 'rdt_virt.cloud.watcher_reads', conf,
            str(PERIOD)] + [uuids[HIGH], uuids[LOW]]
    flow.out('$ python ' + ' '.join(argv[1:]))
    proc = subprocess.run(argv, env=flow.env, capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        flow.expect(False, 'watcher_reads failed: %s' % proc.stderr[-2000:])
    reads = json.loads(proc.stdout)
    for name, uuid in sorted(uuids.items()):
        r = reads[uuid]
        flow.out('  %s: current %s, mean over 2 x period %s, previous '
                 '(2 x that - current) %s; points %s' % (
                     name, r['current'], r['over_2p'], r['previous'],
                     ', '.join('%s %.0f' % (p[0][11:16], p[2])
                               for p in r['points'])))
    flow.expect(all(reads[u]['current'] is not None and
                    reads[u]['current'] == reads[u]['previous']
                    for u in uuids.values()),
                "and had the call worked, Watcher's Gnocchi helper returns "
                "the window's last point for both windows, so previous "
                "equals current and no threshold can hold")
