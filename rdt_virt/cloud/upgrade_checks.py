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

"""What an operator checks after each upgrade step, on records (no I/O).

Each function compares what :mod:`rdt_virt.cloud.upgrade` read before a
step with what it read during or after it, and returns the differences
as sentences: an empty list passes.
"""

import collections


def changed_states(before, after, moved=()):
    """Servers whose state or host changed.

    :param before, after: {server name: (status, host)}.
    :param moved: servers the step moved on purpose (their host may
        change, not their status).
    """
    found = []
    for name, (status, host) in sorted(before.items()):
        if name not in after:
            found.append('%s is gone' % name)
            continue
        now_status, now_host = after[name]
        if now_status != status:
            found.append('%s went from %s to %s' % (name, status,
                                                    now_status))
        if now_host != host and name not in moved:
            found.append('%s moved from %s to %s' % (name, host, now_host))
    return found


def thread_moves(baseline, samples, left=()):
    """vCPU threads seen outside the resctrl group they started in.

    :param baseline: {host: {thread id: group}} before the step.
    :param samples: [(seconds, {host: {thread id: group}})] taken during
        the step; a thread in no group reads as the default group, ``''``.
    :param left: hosts whose threads may move (a server moved on purpose
        leaves its host; its threads then show in no sample).
    :returns: one sentence per thread and group it was seen in, with the
        first time it was seen there.
    """
    found = {}
    for seconds, taken in samples:
        for host, threads in sorted(baseline.items()):
            if host in left or host not in taken:
                continue
            for tid, group in sorted(threads.items()):
                now = taken[host].get(tid, '')
                if now != group and (host, tid, now) not in found:
                    found[host, tid, now] = (
                        '%s: thread %s of %s seen in %s at %.1f s' % (
                            host, tid, group, now or 'the default group',
                            seconds))
    return [found[k] for k in sorted(found)]


def live_threads(baseline, running):
    """``baseline`` less the threads that no longer exist.

    A vCPU thread ends only with its guest, which no upgrade step stops;
    a server moved on purpose takes its threads with it.

    :param running: {host: set of thread ids alive now}.
    """
    return {host: {t: g for t, g in threads.items()
                   if t in running.get(host, ())}
            for host, threads in baseline.items()}


def changed_schemata(before, after, keep=lambda group: True):
    """Groups whose schemata changed, appeared or disappeared.

    :param before, after: {host: {group: schemata text}}.
    :param keep: which groups to compare (the controller's groups change
        with the load, whoever runs).
    """
    found = []
    for host in sorted(set(before) | set(after)):
        old = {g: s for g, s in before.get(host, {}).items() if keep(g)}
        new = {g: s for g, s in after.get(host, {}).items() if keep(g)}
        for group in sorted(set(old) | set(new)):
            if group not in new:
                found.append('%s: %s is gone' % (host, group))
            elif group not in old:
                found.append('%s: %s appeared' % (host, group))
            elif _lines(old[group]) != _lines(new[group]):
                found.append('%s: %s changed from %r to %r' % (
                    host, group, old[group].strip(), new[group].strip()))
    return found


def _lines(text):
    return sorted(line.strip() for line in text.splitlines()
                  if line.strip())


def changed_allocations(before, after, moved=()):
    """Servers whose Placement allocations changed.

    :param before, after: {server name: {provider name: {resource class:
        amount}}}.
    :param moved: servers whose allocation follows them to another host:
        only the amounts are compared.
    """
    found = []
    for name, old in sorted(before.items()):
        new = after.get(name)
        if new is None:
            found.append('%s has no allocation' % name)
        elif name in moved:
            if sorted(old.values(), key=repr) != sorted(new.values(),
                                                        key=repr):
                found.append('%s: %s became %s' % (name, old, new))
        elif new != old:
            found.append('%s: %s became %s' % (name, old, new))
    return found


def unowned_usage(usages, allocations):
    """Providers whose usage no server's allocation accounts for.

    A migration's allocation left behind on its source, for one.

    :param usages: {provider name: {resource class: usage}}.
    :param allocations: {server name: {provider name: {resource class:
        amount}}}.
    """
    owned = collections.defaultdict(collections.Counter)
    for held in allocations.values():
        for provider, resources in held.items():
            owned[provider].update(resources)
    found = []
    for provider, used in sorted(usages.items()):
        extra = {rc: n - owned[provider][rc] for rc, n in sorted(
            used.items()) if n != owned[provider][rc]}
        if extra:
            found.append('%s: usage %s that no server holds' % (
                provider, ', '.join('%s %+d' % kv for kv in extra.items())))
    return found


def largest_gap(times, start, end):
    """The longest time in [start, end] without a point of a series.

    :param times: the series' timestamps (seconds), in any order.
    :returns: seconds; the whole window if no point falls in it.
    """
    inside = sorted(t for t in times if start <= t <= end)
    edges = [start] + inside + [end]
    return max(b - a for a, b in zip(edges, edges[1:]))


def by_label(series, label):
    """{label value: timestamps of every series with it}, merged.

    :param series: [(labels, timestamps)], as Prometheus answers: one
        server's metrics become one timeline, whichever are exported.
    """
    found = {}
    for labels, times in series:
        if label in labels:
            found.setdefault(labels[label], set()).update(times)
    return {k: sorted(v) for k, v in found.items()}


def without_values(monitored, at):
    """Servers whose host's agent had no values for them at ``at``.

    Ceilometer publishes nothing for such a server (the agent's pollsters
    never turn "no value" into a number): for example a guest that has
    not run since it moved, whose new monitoring group reads
    ``Unavailable`` on the kernel ("no traffic yet"). Its Ceilometer
    series has no point to miss.

    :param monitored: [(labels, [(timestamp, value)])] of
        ``rdt_virt_instance_monitored`` (1 with values, 0 without).
    :returns: {instance_uuid} whose last sample at or before ``at`` is 0.
    """
    last = {}
    for labels, points in monitored:
        uuid = labels.get('instance_uuid')
        for t, value in points:
            if uuid and t <= at and (uuid not in last or t >= last[uuid][0]):
                last[uuid] = (t, value)
    return {uuid for uuid, (_, value) in last.items() if not value}


def gaps(series, start, end, limit):
    """Series with a gap longer than ``limit`` in [start, end].

    :param series: {series name: [timestamps]}.
    :returns: ({name: largest gap}, [sentences for those over the limit]).
    """
    measured = {name: largest_gap(times, start, end)
                for name, times in series.items()}
    over = ['%s: no point for %.0f s (at most %.0f s)' % (name, gap, limit)
            for name, gap in sorted(measured.items()) if gap > limit]
    return measured, over


def rates(samples):
    """Rates between consecutive (seconds, units) samples of a counter.

    A sample without a count (the console not read) is skipped; a count
    that goes back (a new console log) starts the counting afresh.
    """
    points = [(t, u) for t, u in samples if u is not None]
    return [(t1, (u1 - u0) / (t1 - t0))
            for (t0, u0), (t1, u1) in zip(points, points[1:])
            if t1 > t0 and u1 >= u0]


def window_rate(samples, start, end):
    """The mean rate over the samples taken in [start, end], or None."""
    points = [(t, u) for t, u in samples
              if u is not None and start <= t <= end]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    (t0, u0), (t1, u1) = points[0], points[-1]
    return (u1 - u0) / (t1 - t0) if u1 >= u0 else None


def windows(samples, start, end, width):
    """[(window's start, its mean rate)] of ``width``-second windows.

    From ``start`` on. Windows without two readings are left out; the
    last window ends at ``end`` and is kept if it spans half a width or
    more.
    """
    found = []
    t = start
    while t < end:
        stop = min(t + width, end)
        if stop - t >= width / 2.0:
            rate = window_rate(samples, t, stop)
            if rate is not None:
                found.append((t, rate))
        t += width
    return found


def window_rates(samples, start, end, width):
    """The mean rate in each of :func:`windows`."""
    return [rate for _, rate in windows(samples, start, end, width)]


def timeline(found, marks, start, unit):
    """A step's windows and what the step did, in seconds from ``start``.

    :param found: :func:`windows`.
    :param marks: [(time, what the step did then)].
    :param unit: a rate's value in the unit shown.
    """
    rates = ', '.join('%d: %.2f' % (t - start, unit(r)) for t, r in found)
    done = ', '.join('%d: %s' % (t - start, what) for t, what in marks)
    return rates + ('; ' + done if done else '')


def rate_floor(rates):
    """The least rate a window of a step may have, from the baseline's.

    The baseline's lowest window, less the spread of its windows (highest
    less lowest). A window's rate varies without any cause of the
    upgrade's: the guest's own work, the machine's other processes on its
    memory and caches. The baseline's windows show by how much, and a
    step of many windows has a lowest window below the baseline's few by
    that spread alone. Protection lost (the neighbours released) takes
    far more: its neighbours then share the CPUs with it unthrottled.

    :param rates: the baseline's window rates (at least one).
    """
    lowest = min(rates)
    return lowest - (max(rates) - lowest)


def rate_drop(rate, floor):
    """A sentence if ``rate`` is below ``floor``; an unknown rate fails.

    :param floor: :func:`rate_floor` of the rates before the upgrade.
    """
    if rate is None:
        return ['the protected server reported no work']
    if rate < floor:
        return ['the protected server worked at %.3g units/s, below the '
                '%.3g it may (its lowest window before the upgrade, less '
                'the spread of those windows)' % (rate, floor)]
    return []


def first_tick_writes(readings):
    """What the agent wrote in its first tick after a restart.

    :param readings: [(ticks, writes)] of the agent's counters
        (``rdt_virt_agent_ticks_total``, ``_writes_total``), read in order
        from its start; None where the endpoint did not answer.
    :returns: (writes, exact): the writes by the end of the first tick
        seen, and whether that reading was taken with exactly one tick
        done (otherwise it counts the later ticks' writes as well).
        (None, False) if no tick was seen.
    """
    for reading in readings:
        if reading and reading[0] >= 1:
            return reading[1], reading[0] == 1
    return None, False
