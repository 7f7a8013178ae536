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

"""The RDT state of this compute host, as nova-compute reads it.

* Capabilities and capacity come from the resctrl filesystem at
  ``[rdt] resctrl_root`` (:class:`~rdt_virt.resctrl.fs.Resctrl`), read
  under resctrl's ``flock`` so a group libvirt is creating is seen whole.
* The cache and memory bandwidth ids libvirt will accept in the domain XML
  come from libvirt's host capabilities; a resctrl domain libvirt does not
  know cannot be allocated (:func:`restrict_to_libvirt`).
* The measured memory bandwidth comes from rdt-virt-agent's host state file
  (``[rdt] state_file``), for the scheduler's bandwidth pressure.
"""

import dataclasses

from oslo_log import log as logging

from rdt_virt.agent import state as agent_state
from rdt_virt import exception
from rdt_virt.policy import capacity as capacity_mod
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info

LOG = logging.getLogger(__name__)

# An agent that has not published for this long (or three of its own
# intervals, if longer) no longer describes the host: the state module's
# rule, which every reader of the state file applies.
AGENT_MIN_MAX_AGE = agent_state.MIN_MAX_AGE

NO_RDT = info.HostCapabilities()


@dataclasses.dataclass(frozen=True)
class ResctrlState:
    """What resctrl says about this host right now."""

    caps: info.HostCapabilities
    # Free capacity before this host's claims are taken into account.
    capacity: capacity_mod.Capacity
    group_names: frozenset


def empty_state():
    """The state of a host without RDT (nothing mounted)."""
    return ResctrlState(NO_RDT, capacity_mod.Capacity(0, None, {}),
                        frozenset())


def read_resctrl(resctrl, libvirt_ids=None):
    """Read capabilities and capacity from ``resctrl``.

    :param resctrl: a :class:`~rdt_virt.resctrl.fs.Resctrl`.
    :param libvirt_ids: ``{resource: domain ids}`` libvirt knows, or None
        to trust resctrl (see :func:`restrict_to_libvirt`).
    :returns: a :class:`ResctrlState`; :func:`empty_state` when resctrl is
        not mounted, which is how a host without RDT looks.
    """
    if not resctrl.is_mounted():
        return empty_state()
    with resctrl.lock():
        caps = resctrl.capabilities()
        names = resctrl.list_groups()
        schemata = {None: resctrl.read_schemata()}
        for name in names:
            schemata[name] = resctrl.read_schemata(name)
        mon_groups = 0
        if caps.monitor is not None:
            mon_groups = len(resctrl.list_mon_groups())
            for name in names:
                mon_groups += len(resctrl.list_mon_groups(name))
    if libvirt_ids is not None:
        caps = restrict_to_libvirt(caps, libvirt_ids)
    cap = capacity_mod.from_state(caps, schemata, mon_groups,
                                  resctrl.prefix)
    return ResctrlState(caps, cap, frozenset(names))


def restrict_to_libvirt(caps, libvirt_ids):
    """``caps`` limited to the resources and domains libvirt knows.

    libvirt refuses a ``<cache id=...>`` or ``<node id=...>`` it did not
    find in the host's cache topology, so a resctrl resource or domain it
    does not report is of no use to the driver. (On real hardware both
    agree; an emulated resctrl may not.)

    :param libvirt_ids: ``{resctrl resource name: iterable of ids}``.
    """
    caches = {}
    for name, res in caps.caches.items():
        ids = frozenset(libvirt_ids.get(name, ()))
        if not ids:
            LOG.warning('libvirt reports no %s cache control; not offering '
                        'it', name)
            continue
        if not ids.issuperset(res.domain_ids):
            LOG.warning('libvirt does not know %s cache ids %s; not '
                        'offering %s', name,
                        sorted(set(res.domain_ids) - ids), name)
            continue
        caches[name] = res
    membw = {}
    for name, res in caps.membw.items():
        ids = frozenset(libvirt_ids.get(name, ()))
        if name == 'MB' and not ids.issuperset(res.domain_ids):
            # Percent values go through <memorytune>, which needs them;
            # other units are applied by rdt-virt-agent directly.
            if res.unit == info.UNIT_PERCENT:
                LOG.warning('libvirt does not know memory bandwidth nodes '
                            '%s; not offering MBA',
                            sorted(set(res.domain_ids) - ids))
                continue
        membw[name] = res
    return dataclasses.replace(caps, caches=caches, membw=membw)


def agent_bandwidth(path, now=None):
    """The host's measured memory bandwidth in bytes/s, or None.

    None when rdt-virt-agent does not run, has not measured yet, or has
    stopped publishing.
    """
    doc = agent_state.read(path)
    if doc is None:
        return None
    try:
        if agent_state.is_stale(doc, now):
            return None
        value = doc.get('host', {}).get('mbm_total_bps')
        return None if value is None else float(value)
    except (TypeError, ValueError, AttributeError):
        return None


def resctrl_for(conf):
    """A :class:`~rdt_virt.resctrl.fs.Resctrl` for ``[rdt]`` of ``conf``."""
    return fs.Resctrl(conf.rdt.resctrl_root, conf.rdt.group_prefix,
                      osrelease=conf.rdt.kernel_release_file)


def safe_read(resctrl, libvirt_ids=None):
    """:func:`read_resctrl`, logging and returning no RDT on errors.

    Reporting must never fail the compute host's resource update.
    """
    try:
        return read_resctrl(resctrl, libvirt_ids)
    except (exception.RDTVirtException, OSError) as e:
        LOG.error('Cannot read RDT state from %s: %s', resctrl.root, e)
        return empty_state()
