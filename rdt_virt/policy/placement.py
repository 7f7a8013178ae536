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

"""RDT in Placement: the CLOSID resource class and the flavor keys for it.

Every instance with a cache allocation or a memory bandwidth limit of its
own holds one resctrl control group, so one CLOSID, on its host. The compute
host reports them as inventory of the resource class :data:`RESOURCE_CLASS`;
a flavor that requests ``resources:CUSTOM_RDT_CLOSID=1`` gets the CLOSID in
the Placement allocation that Nova makes atomically when it schedules the
instance, and keeps it through resize, migration, evacuation and unshelve as
Nova moves allocations.

A flavor's ``hw:`` RDT keys say what the instance needs; its ``resources:``
and ``trait:`` keys say what Placement reserves and where. This module
derives the second from the first (:func:`expected`), and says how a
flavor's keys differ from it (:func:`audit`): keys missing (the flavor runs
in filter-only mode, which works but is not atomic), keys that contradict
the ``hw:`` keys (an instance that would hold a CLOSID Placement does not
count, or the opposite), which the compute host refuses, and keys that do
no harm but are no longer needed (:func:`unneeded_traits`).

Pure functions of extra specs; nothing here imports Nova.
"""

import dataclasses
import re
import shlex
import typing

from rdt_virt.policy import extra_specs as es
from rdt_virt.resctrl import info

RESOURCE_CLASS = 'CUSTOM_RDT_CLOSID'
TRAIT_PREFIX = 'CUSTOM_RDT_'
REQUIRED = 'required'
FORBIDDEN = 'forbidden'

# Nova's flavor syntax: resources<group>:<class> and trait<group>:<trait>,
# the group suffix being optional (nova.scheduler.utils.ResourceRequest).
_RESOURCES = re.compile(r'^resources([a-zA-Z0-9_-]{0,64}):(?P<rc>.+)$')
_TRAIT = re.compile(r'^trait([a-zA-Z0-9_-]{0,64}):(?P<trait>.+)$')


def trait(feature):
    """The trait name of an RDT feature (``MBA`` -> ``CUSTOM_RDT_MBA``)."""
    return TRAIT_PREFIX + feature


def closids_needed(policy):
    """CLOSIDs an instance of ``policy`` holds: 1 with a control group.

    A cache allocation or a bandwidth limit puts the instance in a control
    group of its own (libvirt's, or the agent's for MBps and AMD values).
    Monitoring alone needs an RMID, no CLOSID. A percentage under a host's
    shared strategy joins a group shared by every instance with that
    percentage: the flavor still asks for one CLOSID, so Placement counts
    conservatively there (see the admin guide).
    """
    return 1 if policy.wants_cache or policy.wants_mem_bw else 0


def required_features(policy):
    """The RDT features every host serving ``policy`` must have.

    Only those all hardware variants agree on: ``hw:mem_bw_mbps`` is served
    by hosts mounted with ``mba_MBps`` and by AMD hosts, which both have
    MBA but only the former ``MBA_MBPS``; monitoring takes any of CMT or
    MBM. ``hw:rdt_priority=high`` needs MBA too; its MBM may be total or
    local bandwidth, which no single trait says. ``low`` needs no feature
    (:func:`rdt_virt.policy.fit.fit_priority`), only what its cap needs.
    RDTFilter checks the finer points.
    """
    features = set()
    if policy.cache_l3 is not None:
        features.add(info.L3_CAT)
    if policy.cache_l3_code is not None or policy.cache_l3_data is not None:
        features.add(info.L3_CDP)
    if policy.wants_mem_bw or policy.priority == es.PRIORITY_HIGH:
        features.add(info.MBA)
    return features


def unneeded_traits(policy, traits):
    """RDT traits a flavor requires that its ``hw:`` keys no longer need.

    Only ``CUSTOM_RDT_MBA`` on a ``hw:rdt_priority=low`` flavor without a
    bandwidth cap, which :func:`audit` asked for until low instances were
    allowed on hosts without MBA. Requiring it still works: it keeps the
    flavor off those hosts, which are where a noisy low instance leaves
    protected ones alone. Other traits an operator required are left as
    they are: they may say where the operator wants the instances.

    :param traits: :func:`rdt_traits` of the flavor.
    :returns: ``{trait: why}``.
    """
    name = trait(info.MBA)
    if (policy.is_low and info.MBA not in required_features(policy) and
            traits.get(name) == REQUIRED):
        return {name: '%s=%s runs on hosts without MBA too (no high '
                      'instance runs there), and requiring %s only keeps '
                      'it off them' % (es.RDT_PRIORITY, es.PRIORITY_LOW,
                                       name)}
    return {}


def expected(policy):
    """The Placement keys a flavor of ``policy`` should carry.

    :returns: ``{extra spec key: value}``, empty for a policy that needs
        nothing of Placement.
    """
    keys = {}
    closids = closids_needed(policy)
    if closids:
        keys['resources:' + RESOURCE_CLASS] = str(closids)
    for feature in sorted(required_features(policy)):
        keys['trait:' + trait(feature)] = REQUIRED
    return keys


def requested_closids(extra_specs):
    """CLOSIDs a flavor requests from Placement, or None if it does not.

    Sums the unsuffixed and the numbered request groups, as Placement
    would allocate each of them.

    :raises: ValueError for an amount that is not an integer (the API
        refuses those; a flavor from before validation may have one).
    """
    total = None
    for key, value in extra_specs.items():
        match = _RESOURCES.match(key)
        if match and match.group('rc') == RESOURCE_CLASS:
            try:
                amount = int(str(value).strip())
            except ValueError:
                raise ValueError('%s=%s is not a number of CLOSIDs' % (
                    key, value))
            total = (total or 0) + amount
    return total


def rdt_traits(extra_specs):
    """``{trait: 'required'|'forbidden'|...}`` of the CUSTOM_RDT_* traits."""
    found = {}
    for key, value in extra_specs.items():
        match = _TRAIT.match(key)
        if match and match.group('trait').startswith(TRAIT_PREFIX):
            found[match.group('trait')] = str(value).strip().lower()
    return found


# What a flavor that needs changes is (Audit.kind).
#: Its Placement keys contradict its hw: keys: compute hosts refuse it.
CONFLICTING = 'conflicting'
#: It requests RDT from Placement (a CLOSID or an RDT trait) but lacks
#: some of the keys: Placement may pick a host without the feature.
PLACEMENT_INCOMPLETE = 'placement-incomplete'
#: It has no RDT Placement key: only RDTFilter places it (not atomic).
FILTER_ONLY = 'filter-only'


@dataclasses.dataclass(frozen=True)
class Audit:
    """How a flavor's Placement keys compare with its ``hw:`` RDT keys."""

    # Keys to set, {key: value}: missing ones and wrong values.
    set: typing.Mapping[str, str]
    # Keys to remove.
    unset: typing.Tuple[str, ...]
    # Contradictions between hw: and Placement keys, as sentences; the
    # compute host refuses a flavor that has any.
    conflicts: typing.Tuple[str, ...]
    # CONFLICTING, PLACEMENT_INCOMPLETE or FILTER_ONLY (when not ok).
    kind: str = FILTER_ONLY
    # Keys the flavor may drop, {key: why}: they do no harm, the flavor
    # is ok with them.
    unneeded: typing.Mapping[str, str] = dataclasses.field(
        default_factory=dict)

    @property
    def ok(self):
        return not self.set and not self.unset


def audit(extra_specs):
    """Compare a flavor's Placement keys with its ``hw:`` RDT keys.

    :param extra_specs: the flavor's extra specs.
    :raises: InvalidExtraSpec when the ``hw:`` keys themselves are invalid.
    :returns: an :class:`Audit`.
    """
    policy = es.from_extra_specs(extra_specs)
    want = expected(policy)
    closids = closids_needed(policy)
    conflicts = []
    to_set, to_unset = {}, []
    key = 'resources:' + RESOURCE_CLASS
    try:
        requested = requested_closids(extra_specs)
    except ValueError as e:
        conflicts.append(str(e))
        requested = None
    if requested is None:
        if closids:
            to_set[key] = want[key]
        elif conflicts:
            to_unset.append(key)
    elif requested != closids:
        if closids:
            conflicts.append('requests %d %s, its hw: keys need %d' % (
                requested, RESOURCE_CLASS, closids))
        else:
            conflicts.append('requests %d %s, no hw: key uses one' % (
                requested, RESOURCE_CLASS))
        for name in extra_specs:
            match = _RESOURCES.match(name)
            if (match and match.group('rc') == RESOURCE_CLASS and
                    name != key):
                to_unset.append(name)
        if closids:
            to_set[key] = want[key]
        elif key in extra_specs:
            to_unset.append(key)
    traits = rdt_traits(extra_specs)
    for feature in sorted(required_features(policy)):
        name = trait(feature)
        state = traits.get(name)
        if state == REQUIRED:
            continue
        if state == FORBIDDEN:
            conflicts.append('forbids trait %s, its hw: keys need it' %
                             name)
        to_set['trait:' + name] = REQUIRED
    if conflicts:
        kind = CONFLICTING
    elif requested is not None or traits:
        kind = PLACEMENT_INCOMPLETE
    else:
        kind = FILTER_ONLY
    drop = unneeded_traits(policy, traits)
    unneeded = {}
    for name in extra_specs:
        match = _TRAIT.match(name)
        if match and match.group('trait') in drop:
            unneeded[name] = drop[match.group('trait')]
    return Audit(set=to_set, unset=tuple(sorted(to_unset)),
                 conflicts=tuple(conflicts), kind=kind, unneeded=unneeded)


def conflicts(extra_specs):
    """The contradictions of :func:`audit`, or () (no hw: key errors)."""
    return audit(extra_specs).conflicts


def fix_commands(flavor, result):
    """The ``openstack`` commands that bring ``flavor`` in line.

    :param flavor: the flavor's name or id.
    :param result: its :class:`Audit`.
    """
    commands = []
    if result.unset:
        commands.append('openstack flavor unset %s %s' % (
            ' '.join('--property %s' % shlex.quote(k) for k in result.unset),
            shlex.quote(flavor)))
    if result.set:
        commands.append('openstack flavor set %s %s' % (
            ' '.join('--property %s' % shlex.quote('%s=%s' % kv)
                     for kv in sorted(result.set.items())),
            shlex.quote(flavor)))
    return commands


def unneeded_commands(flavor, result):
    """The ``openstack`` command that drops ``result.unneeded``, or []."""
    if not result.unneeded:
        return []
    return ['openstack flavor unset %s %s' % (
        ' '.join('--property %s' % shlex.quote(k)
                 for k in sorted(result.unneeded)), shlex.quote(flavor))]


def inventory(num_closids, used, placement_held):
    """The ``CUSTOM_RDT_CLOSID`` inventory record of a compute node.

    :param num_closids: CLOSIDs of the host, the default group's included
        (the minimum over its enabled resctrl resources).
    :param used: CLOSIDs in use or promised now: the default group, every
        control group in resctrl and every instance claim whose group does
        not exist yet.
    :param placement_held: how many of ``used`` belong to instances whose
        flavor requested them from Placement, so that Placement already
        counts them in its allocations.
    :returns: the inventory dict, or None for a host without CLOSIDs.
    """
    if num_closids <= 0:
        return None
    # Everything Nova's allocations do not cover is reserved: the default
    # group, groups of other users and of rdt-virt-agent, and instances of
    # filter-only flavors. Counting an allocated CLOSID here too would
    # count it twice.
    reserved = min(max(used - placement_held, 0), num_closids)
    return {
        'total': num_closids,
        'reserved': reserved,
        'min_unit': 1,
        # One control group holds all the vCPUs of an instance.
        'max_unit': 1,
        'step_size': 1,
        'allocation_ratio': 1.0,
    }
