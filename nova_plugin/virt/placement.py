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

"""The compute host's side of RDT in Placement.

* :func:`update_inventory` adds the ``CUSTOM_RDT_CLOSID`` inventory to the
  compute node's provider, next to what the libvirt driver reported.
  ``total`` is every CLOSID of the host; ``reserved`` is what Nova's
  allocations do not cover: the default group, groups of other resctrl
  users and of rdt-virt-agent, and instances of flavors without
  ``resources:CUSTOM_RDT_CLOSID`` (filter-only mode). Each
  :class:`~nova_plugin.virt.claims.Claim` knows how many of its CLOSIDs
  its instance's allocation holds, so none is counted twice.
* :func:`check_flavor` refuses a flavor whose ``hw:`` RDT keys and
  Placement keys contradict each other, before anything is built.

Cache ways are not Placement inventory: a cache allocation needs a
contiguous run of free ways on every cache id, libvirt places them by best
fit, and the number of ways a size takes depends on each host's way size,
none of which a count per provider can express. RDTFilter and the compute
claim keep handling them (see the admin guide).
"""

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from rdt_virt import exception
from rdt_virt.policy import extra_specs
from rdt_virt.policy import placement

LOG = logging.getLogger(__name__)

RESOURCE_CLASS = placement.RESOURCE_CLASS


def closids_of(flavor):
    """CLOSIDs the Placement allocation of an instance of ``flavor`` holds.

    0 for a flavor without ``resources:CUSTOM_RDT_CLOSID`` or one the
    compute host refuses anyway.
    """
    specs = getattr(flavor, 'extra_specs', None) or {}
    try:
        policy = extra_specs.from_extra_specs(specs)
        requested = placement.requested_closids(specs) or 0
    except (exception.InvalidExtraSpec, ValueError):
        return 0
    return min(max(requested, 0), placement.closids_needed(policy))


def stored_closids(uuid):
    """:func:`closids_of` the flavor Nova has for instance ``uuid``.

    For claims rebuilt from domain XML when nova-compute starts, which does
    not carry the flavor's Placement keys. An instance Nova does not know
    holds no allocation.
    """
    try:
        instance = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), uuid,
            expected_attrs=['flavor'])
    except nova_exception.InstanceNotFound:
        return 0
    except Exception as e:
        # Counted as reserved: Placement then offers one CLOSID less than
        # it could until the instance's next claim, never one too many.
        LOG.warning('Cannot read the flavor of instance %s to tell whether '
                    'Placement holds its CLOSID: %s', uuid, e)
        return 0
    return closids_of(instance.flavor)


def flavor_problem(instance, flavor):
    """Why ``flavor``'s hw: RDT and Placement keys disagree, or None."""
    specs = flavor.extra_specs or {}
    try:
        result = placement.audit(specs)
    except exception.InvalidExtraSpec as e:
        return 'flavor %s: %s' % (flavor.name, e.message)
    if result.conflicts:
        # Short: Nova keeps 255 characters of a fault message.
        reason = 'flavor %s %s (rdt-virt flavor-audit prints the fix)' % (
            flavor.name, '; '.join(result.conflicts))
        LOG.error('The RDT extra specs of flavor %s disagree: %s. Fix it '
                  'with: %s', flavor.name, '; '.join(result.conflicts),
                  ' && '.join(placement.fix_commands(flavor.name, result)),
                  instance=instance)
        return reason
    return None


def check_flavor(instance, flavor=None):
    """Refuse to build with a flavor whose hw: and Placement keys disagree.

    :raises: InstanceUnacceptable naming the problem, which Nova turns into
        a BuildAbortException with that reason: the build fails at once
        with that fault instead of rescheduling to hosts that would all
        refuse it.
    """
    reason = flavor_problem(instance, flavor or instance.flavor)
    if reason:
        raise nova_exception.InstanceUnacceptable(
            instance_id=instance.uuid, reason=reason)


def check_resize(instance, flavor):
    """Refuse to resize to such a flavor, before the instance stops.

    :raises: InstanceFaultRollback of a ResizeError: Nova keeps the
        instance active on its host, gives the destination's allocation
        back and records the reason as the instance's fault.
    """
    reason = flavor_problem(instance, flavor)
    if reason:
        raise nova_exception.InstanceFaultRollback(
            inner_exception=nova_exception.ResizeError(reason=reason))


def update_inventory(provider_tree, nodename, caps, capacity, claims,
                     previous=None):
    """Merge the ``CUSTOM_RDT_CLOSID`` inventory into ``nodename``'s.

    Call after the libvirt driver's ``update_provider_tree``, which sets
    the whole inventory of the provider.

    :param caps: the host's HostCapabilities.
    :param capacity: free capacity after every claim of the host.
    :param claims: every :class:`~nova_plugin.virt.claims.Claim` held.
    :param previous: the provider's inventory before this update.
    """
    inventory = dict(provider_tree.data(nodename).inventory)
    # Every CLOSID the kernel uses; the one io_alloc keeps for I/O is
    # never free, so it counts as used and ends up reserved.
    num = caps.kernel_closids
    free = capacity.free_closids
    if capacity.free_rmids is not None:
        # A control group needs an RMID too: CLOSIDs left without one
        # (RMIDs the kernel hands out are the smallest monitoring pool's,
        # fewer than L3_MON's with package telemetry) are not free.
        free = min(free, capacity.free_rmids)
    used = num - free if num > 0 else 0
    held = sum(claim.placement for claim in claims)
    record = placement.inventory(num, used, held)
    if record is None:
        old = (previous or {}).get(RESOURCE_CLASS)
        if old:
            # Placement refuses to delete inventory that allocations use;
            # keep it, all reserved, until they are gone.
            LOG.warning('The host reports no RDT CLOSIDs any more; keeping '
                        'the %s inventory, all reserved, for the instances '
                        'that hold allocations of it', RESOURCE_CLASS)
            record = dict(old, reserved=old['total'])
    if record is None:
        inventory.pop(RESOURCE_CLASS, None)
    else:
        inventory[RESOURCE_CLASS] = record
    provider_tree.update_inventory(nodename, inventory)
    return record
