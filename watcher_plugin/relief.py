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

"""Which low-priority instance to move off a host, and why (pure logic).

The cloud loop's decision, apart from Watcher: :mod:`.strategy` gathers
the instances, their class and their measures from Watcher's compute
model and datasource, and turns the moves chosen here into actions.

A host needs relief when a high-priority instance runs beside
low-priority ones whose memory bandwidth together is at least
``bandwidth_threshold``, the host's memory bandwidth pressure is at least
``pressure_threshold`` where the datasource publishes pressure, and the
host cannot throttle them further: every measured low instance sits at
the controller's floor (its published ``level`` at or below ``floor``).
Where no level is published, the host loop's state is unknown; the
decision then rests on the bandwidth alone, and says so in its reasons.
The instance to move is the low one with the most bandwidth: its
departure relieves the host most.

A host is left alone when a fact it needs is missing: a low instance
without a bandwidth measure (its share is unknown), an instance whose
level could not be read (``unread``), or, where pressure is read, the
host's pressure. So is a host none of whose low instances fits another
host.
"""

import collections

from rdt_virt import exception
from rdt_virt.policy import extra_specs

HIGH = extra_specs.PRIORITY_HIGH
NORMAL = extra_specs.PRIORITY_NORMAL
LOW = extra_specs.PRIORITY_LOW
CLASSES = extra_specs.PRIORITIES
# Flavor extra spec of the priority classes, and the server metadata key of
# Watcher's upstream noisy_neighbor strategy, which ranks by it.
EXTRA_SPEC = extra_specs.RDT_PRIORITY
METADATA = 'watcher-priority'
_FLAVOR_CLASS = extra_specs.BY_KEY[EXTRA_SPEC]
# noisy_neighbor's default rank: a smaller number sorts first, as the
# more important instance.
DEFAULT_RANK = 5

Instance = collections.namedtuple(
    'Instance', 'uuid name host priority bandwidth level unread',
    defaults=(None,))
Instance.__doc__ = """One instance as the decision sees it.

:param priority: one of :data:`CLASSES`.
:param bandwidth: mean memory bandwidth (bytes/s) over the audit's
    period, or None when no measure exists.
:param level: the controller's published level, or None where none is
    published; ``math.inf`` where the controller let the instance go
    during the period (it can throttle it again).
:param unread: what could not be read of the instance (its level) when
    the datasource failed to answer, else None.
"""

Move = collections.namedtuple('Move', 'instance source relief reason')


def priority_of(extra_specs, metadata):
    """The class of an instance: its flavor's, else its metadata's.

    ``hw:rdt_priority`` is ``high``, ``normal`` or ``low``;
    ``watcher-priority`` is one of those words or, as the upstream
    strategy reads it, a number ranked against 5 (smaller: higher).
    Anything else is ``normal``.
    """
    value = (extra_specs or {}).get(EXTRA_SPEC)
    if value is not None:
        try:
            # As the API, the scheduler and the agent read it: blanks and
            # case carry no meaning.
            return _FLAVOR_CLASS.parse(value)
        except exception.InvalidExtraSpec:
            pass
    value = (metadata or {}).get(METADATA)
    if value is None:
        return NORMAL
    value = str(value).strip().lower()
    if value in CLASSES:
        return value
    try:
        rank = float(value)
    except ValueError:
        return NORMAL
    if rank < DEFAULT_RANK:
        return HIGH
    return LOW if rank > DEFAULT_RANK else NORMAL


# choose() without pressures: the datasource publishes none.
_NOT_READ = object()


def needs_relief(instances):
    """The hosts where a high instance runs beside a low one."""
    classes = collections.defaultdict(set)
    for instance in instances:
        classes[instance.host].add(instance.priority)
    return sorted(host for host, seen in classes.items()
                  if HIGH in seen and LOW in seen)


def choose(instances, has_room, bandwidth_threshold, floor=None,
           pressures=None, pressure_threshold=None):
    """The moves that relieve hosts, and the reasons for every host.

    :param instances: :class:`Instance` of every host in the audit's
        scope.
    :param has_room: ``has_room(instance)`` is True when a host other
        than the instance's own can take it.
    :param bandwidth_threshold: bytes/s the low instances of a host use
        together before a high instance beside them counts as under
        pressure.
    :param floor: the controller's floor level: low instances at or
        below it cannot be throttled further; None: levels are not used.
    :param pressures: {host: the host's memory bandwidth pressure, or
        None where it could not be read}; None: pressure is not used.
    :param pressure_threshold: the pressure at or above which a host can
        need relief, where ``pressures`` is given.
    :returns: (list of :class:`Move`, {host: reason}).
    """
    hosts = collections.defaultdict(list)
    for instance in instances:
        hosts[instance.host].append(instance)
    moves = []
    reasons = {}
    for host in sorted(hosts):
        pressure = _NOT_READ if pressures is None else pressures.get(host)
        move, reason = _relieve(host, hosts[host], has_room,
                                bandwidth_threshold, floor, pressure,
                                pressure_threshold)
        reasons[host] = reason
        if move:
            moves.append(move)
    return moves, reasons


def _relieve(host, instances, has_room, threshold, floor, pressure,
             pressure_threshold):
    high = [i for i in instances if i.priority == HIGH]
    low = [i for i in instances if i.priority == LOW]
    if not high:
        return None, 'no high-priority instance'
    if not low:
        return None, 'no low-priority instance'
    unmeasured = [i.name for i in low if i.bandwidth is None]
    if unmeasured:
        return None, 'no measures of %s' % ', '.join(sorted(unmeasured))
    unread = [i for i in low if i.unread]
    if unread:
        return None, 'cannot read %s' % '; '.join(
            '%s of %s' % (i.unread, i.name)
            for i in sorted(unread, key=lambda i: i.name))
    if pressure is None:
        return None, 'no measure of the host\'s memory bandwidth pressure'
    total = sum(i.bandwidth for i in low)
    if total < threshold:
        return None, ('low-priority bandwidth %.0f B/s is under the '
                      'threshold %.0f B/s' % (total, threshold))
    if pressure is not _NOT_READ and pressure < pressure_threshold:
        return None, ('memory bandwidth pressure %.2f is under the '
                      'threshold %.2f' % (pressure, pressure_threshold))
    levels = [i.level for i in low if i.level is not None]
    if floor is not None and levels:
        above = [i.name for i in low
                 if i.level is not None and i.level > floor]
        if above:
            return None, ('the host can still throttle %s (level above '
                          'the floor %g)' % (', '.join(sorted(above)),
                                             floor))
        throttle = 'all at the floor %g' % floor
    else:
        throttle = 'no published levels: bandwidth only'
    if pressure is not _NOT_READ:
        throttle += ', pressure %.2f' % pressure
    # The most bandwidth first; one that fits nowhere else gives way to
    # the next.
    ranked = sorted(low, key=lambda i: (-i.bandwidth, i.name))
    for candidate in ranked:
        if not has_room(candidate):
            continue
        reason = ('%s uses %.0f of the %.0f B/s of the low-priority '
                  'instances beside %s (%s)' % (
                      candidate.name, candidate.bandwidth, total,
                      ', '.join(sorted(i.name for i in high)), throttle))
        return Move(candidate, host, candidate.bandwidth, reason), reason
    return None, 'no other host has room for %s' % ', '.join(
        i.name for i in ranked)
