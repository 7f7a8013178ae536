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
one, an audit with ``rdt_noisy_neighbor`` on Gnocchi and the same audit
through Aetos (Prometheus on 2025.1), whose plans must agree, the plan
applied, a noisy server on the other host, and the protected server's
work rate before and after. :func:`classes` runs the loop on the
protection classes: the audit moves a ``hw:rdt_priority=low`` server that
rdt-virt-agent's controller already holds at the floor. All take the
:class:`~rdt_virt.cloud.flow.Flow`.
"""

import os
import time

from rdt_virt.agent import state as state_mod
from rdt_virt.cloud import flow_prometheus
from rdt_virt.cloud import prometheus
from rdt_virt.cloud import services
from rdt_virt import exception
from rdt_virt.sandbox import guest
from watcher_plugin import meters
from watcher_plugin import promql

STRATEGY = 'rdt_noisy_neighbor'
GOAL = 'noisy_neighbor'
LOW = ('low-1', 'low-2')
# One low server burns memory bandwidth, the other idles: the audit must
# move the noisy one, whichever datasource it reads. (Two burning ones
# use the same bandwidth within a few percent, and Gnocchi's 5-minute
# means and Prometheus's 5 s samples may then rank them either way.)
LOW_IMAGES = {'low-1': 'rdt-burn', 'low-2': 'rdt-idle'}
NOISIEST = 'low-1'
# The audit's granularity on Gnocchi: its archive policy's 5-minute means.
GRANULARITY = services.COARSE
# The controller's floor on the reference host (controller_floor, 10%,
# its MBA minimum too): the audit's default floor.
FLOOR = 10
# The controller holds its low servers while the pressure stays above its
# low watermark (controller_low_watermark); the class audit reads the
# host as pressed from there on, as the agent does.
HELD_PRESSURE = 0.6
# A pressure the audit on the Prometheus path can read the host as pressed
# at: the low watermark, or less where the host reads lower. A learned
# capacity is the highest total the host sustained so far, so a host that
# ran busier work before (the upgraded cloud's compute1) reads a lower
# pressure for the same servers. The threshold is then this share of what
# the strategy's own query reads just before the audit, and an audit with
# a threshold REFUSED times that reading must recommend nothing: the
# pressure gates the move on either side of the reading.
ACTS_AT, REFUSED = 0.8, 1.5
# The least reading to gate on: the low servers burn memory bandwidth.
MIN_PRESSURE = 0.2
# The agent's label of an instance's series.
INSTANCE_LABEL = promql.INSTANCE_LABEL
# The class audit's window on Prometheus (5 s scrapes): half a minute in
# which the controller held every low server at the floor. The test
# cloud's own choice (admin/telemetry-to-action has the strategy's
# parameters and defaults).
CLASS_PERIOD = 30


def prometheus_datasource():
    """Watcher's datasource on the Prometheus path.

    Aetos, or Prometheus itself on 2025.1: Watcher 14 has no Aetos
    datasource, nor has the cloud an Aetos there.
    """
    return 'aetos' if prometheus.aetos_installed() else 'prometheus'


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
    state = flow.table('optimize', 'strategy', 'state', STRATEGY)
    # The meters the strategy reads, not the upstream one's cpu_l3_cache.
    flow.expect(all(m in state for m in meters.METERS) and
                'cpu_l3_cache' not in state,
                '"strategy state" lists the meters %s reads: %s' % (
                    STRATEGY, ', '.join(meters.METERS)))


def _rate(flow, name):
    """Bytes/s of work from two console reads ``WORK_WINDOW`` s apart."""
    def sample():
        now = time.monotonic()
        _, text = flow.os('console', 'log', 'show', name, show=False)
        return now, guest.work_units(text)
    first = flow.wait("%s's work banner" % name,
                      lambda: (lambda s: s if s[1] is not None else None)(
                          sample()), timeout=180, interval=3)
    time.sleep(flow.WORK_WINDOW)
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
    return flow.wait(what, check, timeout=timeout, interval=2)


def _audit(flow, params, tries=1, pause=30):
    """An audit of the strategy with ``params``; returns (plan, migrations).

    A list value is given as JSON, which watcherclient's ``-p`` reads.
    An audit that recommends nothing (no action plan, or an empty one,
    which Watcher creates as SUCCEEDED) shows the strategy's reasons from
    the decision engine's log; with ``tries`` above one it is run again
    after ``pause`` seconds, up to ``tries`` audits in all.
    """
    for attempt in range(1, tries + 1):
        plans = _one_audit(flow, params)
        recommended = [p for p in plans if p['State'] == 'RECOMMENDED']
        if recommended:
            break
        _decision_log(flow)
        flow.out('  note: audit %d of %d recommends nothing (action plans: '
                 '%s)%s' % (attempt, tries, ', '.join(
                     p['State'] for p in plans) or 'none',
                     '; again in %d s' % pause if attempt < tries else ''))
        if attempt < tries:
            time.sleep(pause)
    flow.expect(len(recommended) == 1 and len(plans) == 1,
                'the audit on %s recommends an action plan' %
                params['datasources'])
    plan = recommended[0]['UUID']
    return plan, _migrations(flow, plan)


def _one_audit(flow, params):
    """Run one audit; returns its action plans as the user lists them."""
    args = []
    for key, value in sorted(params.items()):
        if key == 'datasources':
            value = '["%s"]' % value
        args += ['-p', '%s=%s' % (key, value)]
    _, text = flow.os('optimize', 'audit', 'create', '-g', GOAL, '-s',
                      STRATEGY, *args, '-f', 'value', '-c', 'UUID')
    audit = text.strip().splitlines()[0]
    _wait_status(flow, 'the audit', ('optimize', 'audit', 'show', audit),
                 ('SUCCEEDED',), ('FAILED', 'CANCELLED'))
    flow.table('optimize', 'audit', 'show', audit, '-c', 'UUID', '-c',
               'State', '-c', 'Strategy', '-c', 'Parameters')
    return flow.os('optimize', 'actionplan', 'list', '--audit', audit,
                   parse=True)


def _noisiest_in_gnocchi(flow, uuids):
    """The server of ``uuids`` ({name: UUID}) with the highest mean.

    The mean of its ``memory.bandwidth.total`` at the audit's granularity;
    None while one of them has no such measure.
    """
    means = {}
    for name, uuid in uuids.items():
        values = [m['value'] for m in flow._gnocchi_measures(
            uuid, 'memory.bandwidth.total', GRANULARITY)]
        if not values:
            return None
        means[name] = sum(values) / len(values)
    return max(means, key=means.get)


def _expect_one_low_moved(flow, migrations, low):
    """The plan live-migrates one server of ``low``, anywhere."""
    flow.expect(len(migrations) == 1 and
                migrations[0]['Parameters'].get('migration_type') == 'live'
                and migrations[0]['Parameters'].get('resource_name') in low
                and not migrations[0]['Parameters'].get('destination_node'),
                'the plan live-migrates %s, its destination left to Nova\'s '
                'scheduler' % (low[0] if len(low) == 1 else
                               'one low-priority server'))


# What two plans must share to agree: the server, how, and from where.
AGREE = ('resource_id', 'resource_name', 'migration_type', 'source_node',
         'destination_node')


def _agree(flow, by_gnocchi, by_other, source):
    ours = {k: by_gnocchi['Parameters'].get(k) for k in AGREE}
    theirs = {k: by_other['Parameters'].get(k) for k in AGREE}
    flow.expect(ours == theirs, 'the plans on gnocchi and on %s agree: %s'
                % (source, ', '.join('%s=%s' % kv for kv in sorted(
                    ours.items()) if kv[1])) if ours == theirs else
                'the plans on gnocchi and on %s differ: %s / %s' % (
                    source, ours, theirs))


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
                '--flavor', 'rdt.watcher-low', '--image', LOW_IMAGES[name],
                '--nic', 'none',
                '--host', host, '--property', 'watcher-priority=low',
                '--wait', name)
    flow.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
               '-c', 'Host', '-c', 'Properties')
    flow.expect(all(flow._host_of(n) == host for n in LOW),
                'the low-priority servers run on %s, beside protected' % host)
    before = _rate(flow, 'protected')
    uuids = {name: flow._show(name)['id'] for name in LOW}
    # A server's first measures can cover its firmware's start, where the
    # burning and the idle guest look alike: the audit is asked only once
    # Gnocchi's 5-minute means show the burning one as the noisier.
    flow.wait('Gnocchi to show %s as the noisiest low server' % NOISIEST,
              lambda: _noisiest_in_gnocchi(flow, uuids) == NOISIEST,
              timeout=300, interval=5)

    params = {'period': 900, 'granularity': GRANULARITY, 'refresh': 'true',
              'bandwidth_threshold': bandwidth_threshold}
    plan, migrations = _audit(flow, dict(params, datasources='gnocchi'))
    _expect_one_low_moved(flow, migrations, (NOISIEST,))
    # The same audit on the Prometheus path: the mean over a window as
    # long as the low servers' lives (Prometheus has every 5 s sample;
    # Gnocchi's 5-minute points are what needs the longer period above),
    # and the host's pressure, which only this path has.
    source = prometheus_datasource()
    acts, refused = _pressure_gate(flow, host, 300)
    params = {'period': 300, 'bandwidth_threshold': bandwidth_threshold,
              'datasources': source}
    start = _log_size(flow)
    plans = _one_audit(flow, dict(params, pressure_threshold=refused))
    said = _decision_log(flow, start)
    flow.expect(not any(p['State'] == 'RECOMMENDED' for p in plans) and
                any('%s: memory bandwidth pressure' % host in line and
                    'under the threshold' in line for line in said),
                'the audit on %s with pressure_threshold=%s recommends '
                'nothing: %s\'s pressure is under it' % (source, refused,
                                                         host))
    _, other = _audit(flow, dict(params, pressure_threshold=acts))
    _expect_one_low_moved(flow, other, (NOISIEST,))
    _agree(flow, migrations[0], other[0], source)
    flow.os('optimize', 'actionplan', 'start', plan)
    _wait_status(flow, 'the action plan', ('optimize', 'actionplan', 'show',
                                           plan),
                 ('SUCCEEDED',), ('FAILED', 'CANCELLED', 'SUPERSEDED'))
    flow.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
               '-c', 'Host')
    moved = [n for n in LOW if flow._host_of(n) != host]
    flow.expect(moved == [NOISIEST] and flow._host_of('protected') == host,
                '%s moved off %s, where protected stays' % (
                    ', '.join(moved) or 'no low server', host))
    after = _rate(flow, 'protected')
    flow.out('  protected: %.1f MiB/s of work before the move, %.1f after '
             '(%s)' % (before / 2.0 ** 20, after / 2.0 ** 20,
                       'both hosts share this machine\'s two cores'))
    flow.os('server', 'delete', '--wait', *LOW)


def pressure_thresholds(reading, held=HELD_PRESSURE):
    """(a threshold the audit acts at, one it must not) for ``reading``.

    ``reading``: the host's pressure as the strategy reads it. None when
    there is none, or when it is under :data:`MIN_PRESSURE`, too little to
    gate on.
    """
    if reading is None or reading < MIN_PRESSURE:
        return None
    return (round(min(held, ACTS_AT * reading), 3),
            round(REFUSED * reading, 3))


def _pressure_gate(flow, host, period):
    """:func:`pressure_thresholds` of what the strategy reads of ``host``.

    Shown with the capacities the agent divides by, as its state file has
    them.
    """
    result = flow_prometheus.prom_query(flow, promql.by_domain(
        promql.PRESSURE, prometheus.FQDN_LABEL, host, period))
    values = [float(r['value'][1]) for r in result]
    reading = max(values) if values else None
    try:
        domains = state_mod.load(flow.cloud.host_dir(
            host, 'host-state.json'))['host']['controller']['domains']
    except (OSError, KeyError, TypeError, exception.InvalidStateFile):
        domains = {}
    capacities = ', '.join(
        'domain %s: %.2f GB/s (%s)' % (d, v['capacity_bps'] / 1e9,
                                       v.get('capacity_source'))
        for d, v in sorted(domains.items()) if v.get('capacity_bps'))
    thresholds = pressure_thresholds(reading)
    flow.expect(thresholds is not None,
                '%s\'s memory bandwidth pressure over the last %d s is %s '
                '(at least %.1f: its servers burn memory bandwidth), against '
                'a capacity of %s' % (
                    host, period, 'unknown' if reading is None else
                    '%.2f' % reading, MIN_PRESSURE, capacities or 'none'))
    flow.out('  the audit acts at a pressure of %.3g and not at %.3g' %
             thresholds)
    return thresholds


def _at_floor_in_window(flow, uuid):
    """Whether the strategy will read ``uuid`` as held at the floor.

    The queries of :mod:`watcher_plugin.promql` over the class audit's
    window: the lowest ``throttled`` of every series of the server is 1,
    and their mean level at most the floor.
    """
    def value(query):
        result = flow_prometheus.prom_query(flow, query)
        return float(result[0]['value'][1]) if result else None
    held = value(promql.lowest(promql.THROTTLED, INSTANCE_LABEL, uuid,
                               CLASS_PERIOD))
    if held != 1:
        return False
    level = value(promql.mean(promql.LEVEL, INSTANCE_LABEL, uuid,
                              CLASS_PERIOD))
    return level is not None and level <= FLOOR


def _held_at_floor(flow, uuids):
    """{name: level} once the state file holds every one at the floor."""
    state = flow._controller_state()
    if not all(u in state for u in uuids.values()):
        return None
    levels = {n: state[u].get('level') for n, u in uuids.items()}
    return levels if all(v is not None and v <= FLOOR
                         for v in levels.values()) else None


def classes(flow, bandwidth_threshold):
    """Watcher moves a low server that the controller holds at the floor.

    The servers of the priority step: a ``high`` one and low ones beside
    it on the host with MBA. The controller throttles the low ones down
    to the floor; from there the host loop can do no more, and the audit
    (on the Prometheus path, whose 5 s samples show its window at the
    floor a window after it began) live-migrates one of them. Nova's
    scheduler puts it on compute2, which has no MBA: low servers may run
    there, unthrottled, high ones may not.

    :param bandwidth_threshold: what the low servers together must use,
        held at the floor, for the high one to count as under pressure.
    """
    host = flow.CONTROLLED
    lows = flow._low_names()
    uuids = {n: flow._show(n)['id'] for n in lows}
    levels = flow.wait('the controller to hold every low server at the '
                       'floor (%d%%)' % FLOOR,
                       lambda: _held_at_floor(flow, uuids), timeout=300,
                       interval=5)
    flow.expect(True, 'the controller holds %s on %s' % (', '.join(
        '%s at %g%%' % kv for kv in sorted(levels.items())), host))

    # What the audit reads, asked as the strategy asks it: held (throttled
    # 1) and at the floor in every sample of the window, over all of a
    # server's series. A server moved to the floor's group has a new
    # series; its old group's, above the floor, stays in the window for a
    # window's length, which a check of each series alone would not see.
    def window_at_floor():
        return all(_at_floor_in_window(flow, uuid)
                   for uuid in sorted(uuids.values()))
    flow.wait('Prometheus to have every low server at the floor for %d s'
              % CLASS_PERIOD, window_at_floor, timeout=CLASS_PERIOD + 120,
              interval=5)
    match = '%s=~"%s"' % (INSTANCE_LABEL,
                          '|'.join(sorted(uuids.values())))
    flow_prometheus.query(flow, '%s{%s}' % (promql.LEVEL, match),
                          (INSTANCE_LABEL, 'value'),
                          env=flow_prometheus.admin_env(flow))

    source = prometheus_datasource()
    # Up to three audits: Watcher's model of the hosts follows Nova's
    # notifications, and an audit that finds nothing says why (the
    # decision engine's lines) before the next one.
    plan, migrations = _audit(flow, {
        'period': CLASS_PERIOD, 'granularity': CLASS_PERIOD,
        'bandwidth_threshold': bandwidth_threshold, 'floor': FLOOR,
        'pressure_threshold': _pressure_gate(flow, host, CLASS_PERIOD)[0],
        'datasources': source}, tries=3)
    _decision_log(flow)
    _expect_one_low_moved(flow, migrations, lows)
    flow.os('optimize', 'actionplan', 'start', plan)
    _wait_status(flow, 'the action plan', ('optimize', 'actionplan', 'show',
                                           plan),
                 ('SUCCEEDED',), ('FAILED', 'CANCELLED', 'SUPERSEDED'))
    flow.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
               '-c', 'Flavor', '-c', 'Host')
    moved = [n for n in lows if flow._host_of(n) != host]
    flow.expect(len(moved) == 1 and flow._host_of(moved[0]) == 'compute2'
                and flow._host_of('high') == host,
                '%s, held at the floor, moved to compute2 (no MBA); high '
                'stays on %s' % (', '.join(moved) or 'no low server', host))
    flow.moved_lows = moved
    flow.priority_uuids = None

    # compute2's agent publishes the class and nothing else: no MBA, no
    # level.
    path = flow.cloud.host_dir('compute2', 'host-state.json')
    uuid = uuids[moved[0]]

    def published():
        try:
            entry = state_mod.load(path)['instances'].get(uuid)
        except (OSError, exception.InvalidStateFile):
            return None
        # compute2 has MBM: a low server is measured there.
        return entry if entry and entry.get('mbm_total_bps') is not None \
            else None
    entry = flow.wait("compute2's agent to measure %s" % moved[0], published,
                      timeout=120, interval=5)
    flow.ceilometer_forgets('compute2')
    flow.expect(entry.get('priority') == 'low' and
                entry.get('level') is None and
                entry.get('mb_limit') is None,
                "compute2's agent publishes %s as low, unthrottled" %
                moved[0])


def _log_size(flow):
    """Where the decision engine's log ends now."""
    try:
        return os.path.getsize(
            flow.cloud.daemons.log_file('watcher-decision-engine'))
    except OSError:
        return 0


def _decision_log(flow, start=0):
    """The strategy's lines about the hosts, from the decision engine.

    The last ten written from byte ``start`` of its log on; shown, and
    returned.
    """
    try:
        with open(flow.cloud.daemons.log_file('watcher-decision-engine'),
                  'rb') as f:
            f.seek(start)
            text = f.read().decode(errors='replace')
    except OSError:
        return []
    lines = [line.rstrip() for line in text.splitlines()
             if 'watcher_plugin' in line or ' on compute' in line
             or ' ERROR ' in line][-10:]
    for line in lines:
        flow.out('  decision engine: ' + line[-200:])
    return lines
