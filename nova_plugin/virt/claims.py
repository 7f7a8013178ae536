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

"""RDT capacity held by the instances of one compute host.

resctrl shows what is in use *now*: a running instance's libvirt group, the
agent's groups. It does not show what this compute host has promised and
not yet created: an instance being spawned (its group appears only when
libvirt starts the domain), a stopped instance (libvirt removes its group
when the domain stops and needs it back at power on), the destination of
a resize before it starts. :class:`Claims` remembers those promises per
instance, and :func:`available` subtracts every claim whose group resctrl
does not show yet from what resctrl says is free.

Claims live as long as the instance lives on this host: taken at spawn (and
on the destination of a resize or migration), kept across stop, start and
reboot, released when the instance is destroyed here or its resize is
confirmed away. A same-host resize holds both flavors' claims until it is
confirmed or reverted, as Nova does for the other resources.
"""

import dataclasses
import threading

from rdt_virt.libvirt import machine as machine_mod
from rdt_virt.policy import capacity as capacity_mod
from rdt_virt.policy import groups as groups_mod

# libvirt's groups are <machine name>-<allocation id>; see machine_mod.
machine_name = machine_mod.machine_name


@dataclasses.dataclass(frozen=True)
class Claim:
    """The RDT plan an instance holds on this host."""

    uuid: str
    # The libvirt domain name (``instance.name``).
    name: str
    plan: object
    # CLOSIDs of this claim that the instance's Placement allocation
    # covers (its flavor requested CUSTOM_RDT_CLOSID); the others are
    # reported as reserved.
    placement: int = 0


def realized(claim, group_names, machines, prefix):
    """True if resctrl already shows the control group of ``claim``.

    :param group_names: control group names in resctrl.
    :param machines: ``{instance uuid: machine name}`` of the domains that
        run on this host now (:func:`machine_name`).
    """
    plan = claim.plan
    if plan.libvirt_group:
        machine = machines.get(claim.uuid)
        if machine is None:
            return False
        head = machine + '-'
        return any(g.startswith(head) and len(g) > len(head)
                   for g in group_names)
    if plan.own_group:
        return groups_mod.instance_group(prefix, claim.uuid) in group_names
    # Shared groups and monitoring: nothing of the instance's own to count
    # (an existing shared group is in the capacity already).
    return False


class Claims(object):
    """The claims of this host's instances, safe to use from threads.

    Callers that check and then claim hold :attr:`lock` around both, the
    same lock the resource report takes, so two spawns cannot both take
    the last CLOSID.
    """

    def __init__(self):
        self.lock = threading.RLock()
        self._current = {}
        # Source side of a same-host resize, until confirm or revert.
        self._previous = {}

    def get(self, uuid):
        """The current claim of instance ``uuid``, or None."""
        return self._current.get(uuid)

    def add(self, claim, keep_previous=False):
        """Record ``claim`` as the instance's current one.

        :param keep_previous: the instance resizes on this host: keep its
            old claim until the resize is confirmed or reverted.
        """
        with self.lock:
            old = self._current.get(claim.uuid)
            if keep_previous and old is not None:
                self._previous[claim.uuid] = old
            self._current[claim.uuid] = claim

    def set_aside(self, uuid):
        """Keep the current claim as the old one of a same-host resize.

        For a resize to a flavor without RDT: nothing new is claimed, and
        the old claim waits for the confirm or revert.
        """
        with self.lock:
            old = self._current.pop(uuid, None)
            if old is not None:
                self._previous[uuid] = old
            return old

    def release(self, uuid):
        """Drop the current claim of ``uuid``; returns it (or None)."""
        with self.lock:
            return self._current.pop(uuid, None)

    def release_previous(self, uuid):
        """Drop the old claim of a same-host resize (confirm)."""
        with self.lock:
            return self._previous.pop(uuid, None)

    def has_previous(self, uuid):
        return uuid in self._previous

    def restore_previous(self, uuid):
        """Make the old claim of a same-host resize current (revert)."""
        with self.lock:
            old = self._previous.pop(uuid, None)
            if old is not None:
                self._current[uuid] = old
            return old

    def current(self):
        """The current claim of every instance."""
        with self.lock:
            return list(self._current.values())

    def previous(self):
        """The old claims of same-host resizes."""
        with self.lock:
            return list(self._previous.values())

    def all(self):
        """Every claim held, the old sides of same-host resizes included."""
        with self.lock:
            return list(self._current.values()) + list(
                self._previous.values())

    def __len__(self):
        return len(self._current) + len(self._previous)


def available(capacity, claims, group_names, prefix, machines=None,
              previous=()):
    """What is left after the claims that resctrl does not show yet.

    :param capacity: :class:`~rdt_virt.policy.capacity.Capacity` from
        resctrl (``capacity.from_state``).
    :param claims: iterable of current :class:`Claim` objects.
    :param group_names: the control group names in resctrl.
    :param prefix: ``[rdt] group_prefix``.
    :param machines: ``{uuid: machine name}`` of the running domains.
    :param previous: the old claims of same-host resizes. Their domain is
        gone until a revert, and a group of the same instance belongs to
        its new flavor: they are always subtracted.
    """
    names = frozenset(group_names)
    machines = machines or {}
    for claim in claims:
        if not realized(claim, names, machines, prefix):
            capacity = capacity_mod.consume(capacity, claim.plan)
    for claim in previous:
        capacity = capacity_mod.consume(capacity, claim.plan)
    return capacity
