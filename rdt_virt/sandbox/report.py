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

"""The reference scenario's figures, from its samples and its timeline.

Pure functions: :mod:`rdt_virt.sandbox.scenario` runs the guests and
collects samples and timeline points, this module turns them into means,
times, tables and the data the chart draws, and can be tested with made-up
numbers.

A *sample* (one per measuring window of a steady phase)::

    {'work': bytes/s of the protected guest,
     'works': {name: bytes/s},          # every guest's own work rate
     'cpu': {name: share of one CPU}, 'mbm': {name: bytes/s}}

A *timeline point* (about one a second in the controller's phases)::

    {'t': seconds since the scenario started, 'phase': key,
     'units': {name: work units reported so far, or None},
     'levels': {name: the controller's level in percent, or None},
     'in_force': {name: MB of its resctrl group, if below the default's},
     'agent': what the agent's last sample saw (Scenario._view)}

The controller's level is None while it holds the guest no lower than its
static policy (the agent's state file, ``"level": null``). The state file
shows the level in force at its last sample, one sample interval after
the tick that wrote it; ``in_force`` is what resctrl holds at the point,
and the times until a guest is throttled or released count from it
(timelines recorded without it, from ``levels``).
"""

import math

from rdt_virt.sandbox import guest

NOISY = ['noisy-%d' % i for i in range(1, 8)]
PROTECTED = 'protected'
GUESTS = [PROTECTED] + NOISY
NOISY_SPECS = {'hw:mem_bw': '10'}
HIGH_SPECS = {'hw:rdt_priority': 'high'}
LOW_SPECS = {'hw:rdt_priority': 'low'}
#: Phase keys and titles, in order.
PHASES = [
    ('alone', 'protected guest alone'),
    ('none', 'with 7 noisy neighbours, no policy'),
    ('per-instance', 'neighbours at hw:mem_bw=10, per-instance strategy'),
    ('shared', 'neighbours at hw:mem_bw=10, shared strategy'),
    ('controller', 'neighbours low, protected high (controller)'),
    ('idle', 'protected guest suspended'),
    ('resumed', 'protected guest resumed'),
]
#: The phases in which the controller acts.
CONTROLLER_PHASES = ('controller', 'idle', 'resumed')
#: The static cap phase 6 is compared with.
STATIC = 'per-instance'
MIB = 1024.0 * 1024

#: Targets (mean of three runs, idle or beside host load; some also of
#: the worst run).
TARGET_SHARE = 0.9
TARGET_MIN_SHARE = 0.8
TARGET_SECONDS = 5.0
TARGET_WORST_SECONDS = 8.0
TARGET_IDLE_RATIO = 2.0
#: Seconds a controller phase settles after its event's effect.
QUIET_SECONDS = 30.0
#: The least length of a controller phase's steady part, after settling,
#: over which level changes are counted and the protected guest's
#: minimum share is taken: longer than the release dwell and than a
#: cycle of throttle and release steps, so that one shows.
STEADY_SECONDS = 60.0


def stats(values):
    """``(mean, standard deviation)`` of samples; None for none."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def _noisy_total(sample):
    works = sample.get('works') or {}
    if not all(works.get(n) is not None for n in NOISY):
        return None
    return sum(works[n] for n in NOISY)


def summarize(samples):
    """Means and spreads of a phase's samples.

    :returns: ``{'work': (mean, sd), 'noisy_work': (mean, sd) or None,
        'guests': {name: {'mbm': (mean, sd), 'cpu': (mean, sd), 'work':
        (mean, sd)}}}``; shares of the alone phase are filled in by
        :func:`add_shares`. ``noisy_work`` is the seven neighbours' total
        work rate, counted in samples that have all seven.
    """
    guests = {}
    for name in GUESTS:
        found = {key: stats([s.get(key, {}).get(name) for s in samples])
                 for key in ('mbm', 'cpu', 'works')}
        if any(found.values()):
            guests[name] = {'mbm': found['mbm'], 'cpu': found['cpu'],
                            'work': found['works']}
    return {'work': stats([s['work'] for s in samples]),
            'work_samples': [s['work'] for s in samples],
            'noisy_work': stats([_noisy_total(s) for s in samples]),
            'mbm_samples': sum(1 for s in samples if s['mbm']),
            'guests': guests}


def reference(results, key):
    """What phase *key*'s protected guest is measured against.

    The alone phase; in phases 5-7 of a run beside host load, the
    protected guest alone beside that load (``results['reference']``), or
    beside the neighbours held at the floor and that load
    (``results['floor']``, the best any throttle gives) where that is
    lower.

    :returns: ``(work, cpu)``: the reference's ``(mean, sd)`` of work rate
        and of vCPU time, either None when not measured.
    """
    if key in CONTROLLER_PHASES:
        refs = [r for r in (results.get('reference'), results.get('floor'))
                if r and r.get('work')]
        if refs:
            ref = min(refs, key=lambda r: r['work'][0])
            return ref.get('work'), ref.get('cpu')
    alone = results.get('alone') or {}
    return (alone.get('work'),
            alone.get('guests', {}).get(PROTECTED, {}).get('cpu'))


def add_shares(results):
    """Each phase's work rate as a share of its :func:`reference`'s mean."""
    for key, phase in results.items():
        if not isinstance(phase, dict) or 'work_samples' not in phase:
            continue        # a run's setting, such as its host load
        alone = reference(results, key)[0]
        if alone and alone[0]:
            phase['share'] = stats([w / alone[0] for w in
                                    phase['work_samples'] if w is not None])
        else:
            phase['share'] = None
    return results


# The timeline ---------------------------------------------------------------

def window_rate(points, name, start, end):
    """*name*'s work rate in bytes/s between *start* and *end*.

    From the first point at or after *start* to the last one at or before
    *end* that both have a count; None when there are no two such points.
    """
    inside = [p for p in points if start <= p['t'] <= end and
              p['units'].get(name) is not None]
    if len(inside) < 2:
        return None
    first, last = inside[0], inside[-1]
    return guest.work_rate((first['t'], first['units'][name]),
                           (last['t'], last['units'][name]))


def window_cpu(points, name, start, end):
    """*name*'s vCPU time between *start* and *end*, in CPUs.

    As :func:`window_rate`, from the points' ``cpu`` seconds. In the
    emulation a guest's memory traffic is its vCPU time at a fixed rate,
    so this is the bandwidth the controller acts on; the guest's own work
    rate adds the throughput of this machine's memory, which varies as
    much alone as beside neighbours.
    """
    inside = [p for p in points if start <= p['t'] <= end and
              (p.get('cpu') or {}).get(name) is not None]
    if len(inside) < 2:
        return None
    first, last = inside[0], inside[-1]
    spent = last['cpu'][name] - first['cpu'][name]
    return spent / (last['t'] - first['t'])


def time_to_rate(points, name, since, rate, hold, measure=window_rate):
    """Seconds from *since* until *name* holds *rate* for *hold* seconds.

    The answer is the start of the first window of *hold* seconds, at a
    point at or after *since*, over which *name*'s work rate (or what
    *measure* gives, such as :func:`window_cpu`) is at least *rate*; None
    if there is none.
    """
    end = points[-1]['t'] if points else since
    for point in points:
        if point['t'] < since or point['t'] + hold > end:
            continue
        got = measure(points, name, point['t'], point['t'] + hold)
        if got is not None and got >= rate:
            return point['t'] - since
    return None


def _held(point):
    """``{name: level}`` a point holds in force (see the module)."""
    return point['in_force'] if 'in_force' in point else point['levels']


def time_until(points, since, names, throttled):
    """Seconds from *since* until all of *names* are throttled.

    With ``throttled=False``: until all are released (level None). None if
    that never happens.
    """
    for point in points:
        if point['t'] < since:
            continue
        levels = _held(point)
        if all((levels.get(n) is not None) == throttled for n in names):
            return point['t'] - since
    return None


def time_to_first_throttle(points, since, names):
    """Seconds from *since* until any of *names* is throttled."""
    for point in points:
        if point['t'] >= since and any(_held(point).get(n) is not None
                                       for n in names):
            return point['t'] - since
    return None


def level_changes(points, start, end):
    """Level changes of any guest between *start* and *end*.

    Each point in the span is compared with the point before it.
    """
    changes = 0
    previous = None
    for point in points:
        if point['t'] > end:
            break
        if previous is not None and point['t'] >= start:
            for name in set(previous['levels']) | set(point['levels']):
                if previous['levels'].get(name) != point['levels'].get(name):
                    changes += 1
        previous = point
    return changes


def min_share(points, name, start, end, hold, reference,
              measure=window_rate):
    """The lowest share of ``reference`` that *name* held.

    Over every window of *hold* seconds that starts at a point between
    *start* and *end* and ends by *end*; None without such a window.
    *measure* is :func:`window_rate` or :func:`window_cpu`.
    """
    rates = [measure(points, name, p['t'], p['t'] + hold)
             for p in points if start <= p['t'] and p['t'] + hold <= end]
    rates = [r for r in rates if r is not None]
    if not rates or not reference:
        return None
    return min(rates) / reference


def steady(points, start, end, hold, reference, cpu_reference=None):
    """A phase's figures over its steady part.

    :param reference: the mean work rate of the phase's :func:`reference`.
    :param cpu_reference: its mean vCPU time (CPUs).
    :returns: ``{'steady': [start, end], 'level_changes': count,
        'min_share': share of alone or None, 'min_cpu_share': the same
        of vCPU time or None}``
    """
    return {'steady': [start, end],
            'level_changes': level_changes(points, start, end),
            'min_share': min_share(points, PROTECTED, start, end, hold,
                                   reference),
            'min_cpu_share': min_share(points, PROTECTED, start, end, hold,
                                       cpu_reference, measure=window_cpu)}


# Tables ---------------------------------------------------------------------

def _pm(value, scale=1.0, fmt='%.1f'):
    if not value:
        return '-'
    return (fmt + ' ± ' + fmt) % (value[0] * scale, value[1] * scale)


def _table(headers, rows):
    widths = [max(len(str(r[i])) for r in [headers] + rows)
              for i in range(len(headers))]
    return '\n'.join('  '.join(str(c).ljust(w) for c, w in zip(r, widths))
                     .rstrip() for r in [headers] + rows) + '\n'


def experiment_table(results):
    """The experiment's table: work rate and share of the alone phase."""
    rows = []
    for i, (key, title) in enumerate(PHASES, 1):
        phase = results.get(key)
        if not phase:
            continue
        rows.append(['%d. %s' % (i, title),
                     _pm(phase['work'], 1 / MIB),
                     _pm(phase['share'], 100.0, '%.0f') + '%'
                     if phase['share'] else '-'])
    return _table(['PHASE', 'WORK RATE [MiB/s]', 'SHARE OF ALONE'], rows)


def _class(name):
    if name == PROTECTED:
        return 'high in 5-7'
    return NOISY_SPECS['hw:mem_bw'] + '% in 3-4, low in 5-7'


def guest_table(results, key, scale, fmt):
    """Every guest's mean ± sd of ``key`` (mbm, cpu, work) per phase."""
    rows = []
    for name in GUESTS:
        row = [name, _class(name)]
        for phase_key, _title in PHASES:
            value = results.get(phase_key, {}).get('guests', {}).get(
                name, {}).get(key)
            row.append(_pm(value, scale, fmt))
        rows.append(row)
    return _table(['GUEST', 'POLICY'] +
                  ['%d. %s' % (i, k) for i, (k, _t) in enumerate(PHASES, 1)],
                  rows)


def _seconds(value):
    return '-' if value is None else '%.1f s' % value


def _mark(ok):
    return 'met' if ok else 'NOT met'


def controller_rows(results):
    """The controller's figures against their targets.

    :returns: ``[(measure, value, target, met)]``, met None where the
        figure is missing.
    """
    rows = []
    phase = results.get('controller')
    if phase:
        share = phase.get('share')
        rows.append(('5. protected work rate, share of alone',
                     _pm(share, 100.0, '%.0f') + '%' if share else '-',
                     '>= %d%%' % (100 * TARGET_SHARE),
                     None if not share else share[0] >= TARGET_SHARE))
        lowest = phase.get('min_share')
        rows.append(('5. its minimum share after settling',
                     _percent(lowest), '>= %d%%' % (100 * TARGET_MIN_SHARE),
                     None if lowest is None else
                     lowest >= TARGET_MIN_SHARE))
        took = phase.get('time_to_target')
        rows.append(('5. time to >= %d%% of alone' % (100 * TARGET_SHARE),
                     _seconds(took), '<= %d s' % TARGET_SECONDS,
                     None if took is None else took <= TARGET_SECONDS))
        rows += _cpu_rows('5.', phase, True)
    phase = results.get('alone')
    if phase and 'min_share' in phase:
        rows.append(('1. alone, minimum share of its own mean',
                     _percent(phase.get('min_share')), '', None))
    beside = _beside_load(results)
    if beside is not None:
        rows.append(('5-7. reference: alone beside the host load, share of '
                     '1.', _percent(beside), '', None))
    floor = _beside_load(results, 'floor')
    if floor is not None:
        rows.append(('5-7. reference: neighbours at the floor beside the '
                     'host load, share of 1.', _percent(floor), '', None))
    phase = results.get('idle')
    static = static_noisy_work(results)
    if phase:
        total = phase.get('noisy_work')
        ratio = total[0] / static[0] if total and static and static[0] \
            else None
        rows.append(('6. neighbours\' total work rate [MiB/s]',
                     _pm(total, 1 / MIB), '', None))
        rows.append(('6. ... against phase 3 (static hw:mem_bw=10)',
                     '-' if ratio is None else '%.2fx' % ratio,
                     '>= %.0fx' % TARGET_IDLE_RATIO,
                     None if ratio is None else ratio >= TARGET_IDLE_RATIO))
        rows.append(('6. time until released',
                     _seconds(phase.get('time_to_release')), '', None))
    phase = results.get('resumed')
    if phase:
        rows.append(('7. time until a neighbour is throttled again',
                     _seconds(phase.get('time_to_throttle')), '', None))
        took = phase.get('time_to_target')
        rows.append(('7. time to >= %d%% of alone again' %
                     (100 * TARGET_SHARE), _seconds(took),
                     '<= %d s' % TARGET_SECONDS,
                     None if took is None else took <= TARGET_SECONDS))
        rows.append(('7. its minimum share after settling',
                     _percent(phase.get('min_share')), '', None))
        rows += _cpu_rows('7.', phase, False)
    for i, (key, _title) in enumerate(PHASES, 1):
        if key in CONTROLLER_PHASES and key in results:
            changes = results[key].get('level_changes')
            rows.append(('%d. level changes after settling' % i,
                         '-' if changes is None else str(changes), '0',
                         None if changes is None else changes == 0))
    return rows


def _cpu_rows(number, phase, minimum):
    """A controller phase's figures of the protected guest's vCPU time.

    The emulated bandwidth the controller acts on (:func:`window_cpu`),
    judged by the same targets as its work rate.
    """
    lowest = phase.get('min_cpu_share')
    took = phase.get('time_to_cpu')
    return [
        ('%s its vCPU time, minimum share after settling' % number,
         _percent(lowest),
         '>= %d%%' % (100 * TARGET_MIN_SHARE) if minimum else '',
         None if lowest is None or not minimum else
         lowest >= TARGET_MIN_SHARE),
        ('%s time to >= %d%% of alone vCPU time' % (
            number, 100 * TARGET_SHARE), _seconds(took),
         '<= %d s' % TARGET_SECONDS,
         None if took is None else took <= TARGET_SECONDS)]


def _percent(share):
    return '-' if share is None else '%.0f%%' % (100 * share)


def controller_table(results):
    """:func:`controller_rows` as text."""
    rows = [[m, v, t, '' if ok is None else _mark(ok)]
            for m, v, t, ok in controller_rows(results)]
    return _table(['MEASURE', 'VALUE', 'TARGET', ''], rows)


def _figures(results):
    """The controller's figures of one run as numbers.

    :returns: ``[(measure, value or None, target text, met(mean) or None,
        met(worst run) or None)]``, in :func:`controller_rows`' order.
    """
    def get(phase, key):
        return (results.get(phase) or {}).get(key)

    def first(value):
        return value[0] if value else None
    at_least = (lambda target: lambda v: v >= target)
    at_most = (lambda target: lambda v: v <= target)
    share = 100 * TARGET_SHARE
    static = first(static_noisy_work(results))
    idle = first(get('idle', 'noisy_work'))

    def percent(phase, key):
        value = get(phase, key)
        value = first(value) if isinstance(value, (list, tuple)) else value
        return None if value is None else 100 * value
    lowest = 100 * TARGET_MIN_SHARE
    rows = [
        ('5. protected work rate, share of alone [%]',
         percent('controller', 'share'), '>= %d, every run' % share,
         at_least(share), at_least(share)),
        ('5. its minimum share after settling [%]',
         percent('controller', 'min_share'), '>= %d, every run' % lowest,
         at_least(lowest), at_least(lowest)),
        ('5. time to >= %d%% of alone [s]' % share,
         get('controller', 'time_to_target'),
         '<= %d, worst <= %d' % (TARGET_SECONDS, TARGET_WORST_SECONDS),
         at_most(TARGET_SECONDS), at_most(TARGET_WORST_SECONDS)),
        ('6. neighbours\' work against phase 3 [x]',
         idle / static if idle and static else None,
         '>= %.0f' % TARGET_IDLE_RATIO, at_least(TARGET_IDLE_RATIO), None),
        ('6. time until released [s]', get('idle', 'time_to_release'), '',
         None, None),
        ('7. time until a neighbour is throttled again [s]',
         get('resumed', 'time_to_throttle'), '', None, None),
        ('7. time to >= %d%% of alone again [s]' % share,
         get('resumed', 'time_to_target'), '<= %d' % TARGET_SECONDS,
         at_most(TARGET_SECONDS), None),
        ('7. its minimum share after settling [%]',
         percent('resumed', 'min_share'), '', None, None),
        ('1. alone, minimum share of its own mean [%]',
         percent('alone', 'min_share'), '', None, None),
        ('5. vCPU time, minimum share after settling [%]',
         percent('controller', 'min_cpu_share'),
         '>= %d, every run' % lowest, at_least(lowest), at_least(lowest)),
        ('5. time to >= %d%% of alone vCPU time [s]' % share,
         get('controller', 'time_to_cpu'),
         '<= %d, worst <= %d' % (TARGET_SECONDS, TARGET_WORST_SECONDS),
         at_most(TARGET_SECONDS), at_most(TARGET_WORST_SECONDS)),
        ('7. time to >= %d%% of alone vCPU time again [s]' % share,
         get('resumed', 'time_to_cpu'), '<= %d' % TARGET_SECONDS,
         at_most(TARGET_SECONDS), None)]
    for i, (key, _title) in enumerate(PHASES, 1):
        if key in CONTROLLER_PHASES:
            rows.append(('%d. level changes after settling' % i,
                         get(key, 'level_changes'), '0', at_most(0),
                         at_most(0)))
    rows.append(('host load outside the guests [CPU hogs]',
                 results.get('host_load', 0), '', None, None))
    beside = _beside_load(results)
    rows.append(('5-7. reference: alone beside the host load, % of 1.',
                 None if beside is None else 100 * beside, '', None, None))
    floor = _beside_load(results, 'floor')
    rows.append(('5-7. reference: at the floor beside the load, % of 1.',
                 None if floor is None else 100 * floor, '', None, None))
    return rows


def static_noisy_work(results):
    """The neighbours' work under the static cap, which phase 6 is against.

    Phase 3's; beside host load, that of the neighbours held at the floor
    beside the same load (``results['floor']``), where measured: what the
    host's own work takes from the released neighbours in phase 6 it took
    from the capped ones too.
    """
    floor = (results.get('floor') or {}).get('noisy_work')
    return floor or (results.get(STATIC) or {}).get('noisy_work')


def _beside_load(results, key='reference'):
    """A reference beside the host load as a share of phase 1, or None.

    The protected guest's work rate alone beside the load (or beside the
    floored neighbours and the load, ``key='floor'``) against alone on the
    idle host; None in a run without host load.
    """
    ref = (results.get(key) or {}).get('work')
    alone = (results.get('alone') or {}).get('work')
    if not ref or not alone or not alone[0]:
        return None
    return ref[0] / alone[0]


def runs_table(runs):
    """The controller's figures of several runs and their mean.

    :param runs: the ``results.json`` of each run.
    A target is judged on the mean; a figure missing from a run (the
    guest never reached the share, say) makes its mean missing too.
    """
    per_run = [_figures(r) for r in runs]
    rows = []
    for i, (measure, _v, target, met, every) in enumerate(per_run[0]):
        values = [figs[i][1] for figs in per_run]
        mean = None if not values or None in values else \
            sum(values) / len(values)
        worst = _worst(values, met)
        ok = mean is not None and met(mean) if met else None
        if every is not None and ok:
            ok = all(v is not None and every(v) for v in values)
        rows.append([measure] + ['-' if v is None else '%.1f' % v
                                 for v in values] +
                    ['-' if mean is None else '%.1f' % mean,
                     worst, target, '' if ok is None else _mark(ok)])
    headers = ['MEASURE'] + ['RUN %d' % (i + 1) for i in range(len(runs))]
    return _table(headers + ['MEAN', 'WORST', 'TARGET', ''], rows)


def _worst(values, met):
    """The run furthest from a target's side: ``RUN n``, or '' or '-'."""
    if met is None:
        return ''
    known = [(v, i) for i, v in enumerate(values, 1) if v is not None]
    if len(known) < len(values):
        return '-'
    # A target that large values meet is missed first by the smallest.
    pick = min(known) if met(float('inf')) else max(known)
    return 'RUN %d' % pick[1]


# The chart's data -----------------------------------------------------------

def timeline_series(points, reference, step=2.0):
    """The timeline as the chart draws it.

    :param reference: the alone phase's mean work rate (bytes/s), or None.
    :param step: the window of each work rate point, in seconds.
    :returns: ``{'marks': [(t, phase key)], 'levels': {name: [(t, level
        in percent, 100 where unthrottled)]}, 'work': [(t, share of alone
        or bytes/s without a reference, None in a gap)]}``
    """
    marks, levels, work = [], {}, []
    phase = None
    for point in points:
        if point['phase'] != phase:
            phase = point['phase']
            marks.append((point['t'], phase))
        for name in GUESTS:
            if name in point['levels'] or name in levels:
                level = point['levels'].get(name)
                levels.setdefault(name, []).append(
                    (point['t'], 100.0 if level is None else float(level)))
    if points:
        t = points[0]['t']
        while t + step <= points[-1]['t']:
            rate = window_rate(points, PROTECTED, t, t + step)
            # None where the window has no two counts (a gap in the
            # recording): the chart breaks the line there.
            work.append((t + step / 2, None if rate is None else
                         rate / reference if reference else rate))
            t += step
    return {'marks': marks, 'levels': levels, 'work': work,
            'relative': bool(reference)}


def chart_data(results, points=()):
    """What :func:`rdt_virt.sandbox.chart.write` draws."""
    phases = []
    for i, (key, title) in enumerate(PHASES, 1):
        phase = results.get(key)
        if not phase:
            continue
        phases.append({
            'label': '%d. %s' % (i, title), 'number': i,
            'share': phase.get('share'),
            'mbm': {name: phase['guests'].get(name, {}).get('mbm')
                    for name in GUESTS}})
    alone = reference(results, 'controller')[0]
    numbers = {k: str(i) for i, (k, _t) in enumerate(PHASES, 1)}
    timeline = None
    if points:
        timeline = timeline_series(points, alone[0] if alone else None)
        timeline['marks'] = [(t, numbers.get(k, k))
                             for t, k in timeline['marks']]
        timeline['target'] = TARGET_SHARE
    return {'title': 'rdt-virt reference scenario on the emulated reference '
                     'host (emulated: guests contend for CPU time)',
            'guests': list(GUESTS), 'protected': PROTECTED,
            'phases': phases, 'timeline': timeline}
