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

"""The flow's Watcher steps: the cloud loop, typed as an operator types it.

:func:`services` checks that Watcher runs with rdt-virt's strategy;
:func:`loop` runs it: noisy low-priority servers beside the protected
one, an audit with ``rdt_noisy_neighbor``, its action plan applied, a
noisy server on the other host, and the protected server's work rate
before and after. Both take the :class:`~rdt_virt.cloud.flow.Flow`.
"""

import time

from rdt_virt.sandbox import guest

STRATEGY = 'rdt_noisy_neighbor'
GOAL = 'noisy_neighbor'
LOW = ('low-1', 'low-2')


def services(flow):
    rows = flow.os('optimize', 'service', 'list', parse=True)
    flow.table('optimize', 'service', 'list')
    states = {r['Name']: r['Status'] for r in rows}
    flow.expect(states.get('watcher-decision-engine') == 'ACTIVE' and
                states.get('watcher-applier') == 'ACTIVE',
                "Watcher's decision engine and applier are ACTIVE")
    flow.table('optimize', 'strategy', 'list', '--goal', GOAL)
    names = {r['Name'] for r in flow.os('optimize', 'strategy', 'list',
                                        '--goal', GOAL, parse=True,
                                        show=False)}
    flow.expect({STRATEGY, 'noisy_neighbor'} <= names,
                'the %s goal has the upstream strategy and %s' % (
                    GOAL, STRATEGY))
    flow.table('optimize', 'strategy', 'state', STRATEGY)


def _rate(flow, name):
    """Bytes/s of work from two console reads ten seconds apart."""
    def sample():
        now = time.monotonic()
        _, text = flow.os('console', 'log', 'show', name, show=False)
        return now, guest.work_units(text)
    first = flow.wait("%s's work banner" % name,
                      lambda: (lambda s: s if s[1] is not None else None)(
                          sample()), timeout=180, interval=3)
    time.sleep(10)
    return guest.work_rate(first, sample())


def _migrations(flow, plan):
    """The plan's actions as the user lists them; returns its migrations."""
    flow.table('optimize', 'action', 'list', '--action-plan', plan,
               '--detail', '-c', 'Action', '-c', 'State', '-c', 'Parameters')
    actions = flow.os('optimize', 'action', 'list', '--action-plan', plan,
                      '--detail', parse=True, show=False)
    return [a for a in actions if a['Action'] == 'migrate']


def _wait_status(flow, what, show, done, failed, timeout=600):
    def check():
        # The state's own line: openstackclient 7.5 (2025.1) adds a
        # warning about the compute API version to every command's output.
        lines = [line.strip() for line in flow.os(
            *show, '-c', 'State', '-f', 'value', show=False)[1].splitlines()]
        status = next((line for line in reversed(lines)
                       if line in done or line in failed), '')
        if status in failed:
            # The flow's own failure (FlowError), without importing the
            # module that imports this one.
            flow.expect(False, '%s is %s' % (what, status))
        return status in done and status
    return flow.wait(what, check, timeout=timeout, interval=5)


def loop(flow, bandwidth_threshold):
    """Watcher moves a noisy low-priority server off the protected one's host.

    :param bandwidth_threshold: the audit's parameter (bytes/s): what the
        low servers together must use for the protected one to count as
        under pressure.
    """
    host = flow._host_of('protected')
    # The protected server moved host without its console log (each host
    # its own instance directory): a hard reboot prints its banner again.
    flow.os('server', 'reboot', '--hard', '--wait', 'protected')
    flow.os('server', 'set', '--property', 'watcher-priority=high',
            'protected')
    flow.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
            'rdt.watcher-low')
    for name in LOW:
        flow.os('--os-compute-api-version', '2.74', 'server', 'create',
                '--flavor', 'rdt.watcher-low', '--image', 'rdt-burn',
                '--nic', 'none',
                '--host', host, '--property', 'watcher-priority=low',
                '--wait', name)
    flow.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
               '-c', 'Host', '-c', 'Properties')
    flow.expect(all(flow._host_of(n) == host for n in LOW),
                'the low-priority servers run on %s, beside protected' % host)
    before = _rate(flow, 'protected')
    for name in LOW:
        uuid = flow._show(name)['id']
        flow.wait('measures of %s in Gnocchi' % name,
                  lambda u=uuid: flow._gnocchi_measures(
                      u, 'memory.bandwidth.total'), timeout=300,
                  interval=10)

    _, text = flow.os('optimize', 'audit', 'create', '-g', GOAL, '-s',
                      STRATEGY, '-p', 'period=900', '-p', 'granularity=300',
                      '-p', 'bandwidth_threshold=%d' % bandwidth_threshold,
                      '-p', 'refresh=true', '-f', 'value', '-c', 'UUID')
    audit = text.strip().splitlines()[0]
    _wait_status(flow, 'the audit', ('optimize', 'audit', 'show', audit),
                 ('SUCCEEDED',), ('FAILED', 'CANCELLED'))
    flow.table('optimize', 'audit', 'show', audit, '-c', 'UUID', '-c',
               'State', '-c', 'Strategy', '-c', 'Parameters')
    plans = flow.os('optimize', 'actionplan', 'list', '--audit', audit,
                    parse=True)
    flow.expect(len(plans) == 1 and plans[0]['State'] == 'RECOMMENDED',
                'the audit recommends an action plan')
    plan = plans[0]['UUID']
    migrations = _migrations(flow, plan)
    flow.expect(len(migrations) == 1 and
                migrations[0]['Parameters'].get('migration_type') == 'live'
                and migrations[0]['Parameters'].get('resource_name') in LOW
                and not migrations[0]['Parameters'].get('destination_node'),
                'the plan live-migrates one low-priority server, its '
                'destination left to Nova\'s scheduler')
    flow.os('optimize', 'actionplan', 'start', plan)
    _wait_status(flow, 'the action plan', ('optimize', 'actionplan', 'show',
                                           plan),
                 ('SUCCEEDED',), ('FAILED', 'CANCELLED', 'SUPERSEDED'))
    flow.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
               '-c', 'Host')
    moved = [n for n in LOW if flow._host_of(n) != host]
    flow.expect(len(moved) == 1 and flow._host_of('protected') == host,
                '%s moved off %s, where protected stays' % (
                    ', '.join(moved) or 'no low server', host))
    after = _rate(flow, 'protected')
    flow.out('  protected: %.1f MiB/s of work before the move, %.1f after '
             '(%s)' % (before / 2.0 ** 20, after / 2.0 ** 20,
                       'both hosts share this machine\'s two cores'))
    flow.os('server', 'delete', '--wait', *LOW)
