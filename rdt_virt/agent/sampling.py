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


"""Sampling: read every monitored instance's counters, publish the rates.

A sample turns the cumulative counters of each instance's monitoring
group into rates (:mod:`rdt_virt.agent.sampler`) and publishes the host
state file (:mod:`rdt_virt.agent.publish`), which the Prometheus
endpoint, the Ceilometer pollsters, ``rdt-virt top`` and the Nova driver
read.
"""

import dataclasses
import os

from oslo_log import log as logging

from rdt_virt.agent import carry
from rdt_virt.agent import ceiling as ceiling_mod
from rdt_virt.agent import counters as counters_mod
from rdt_virt.agent import energy as energy_mod
from rdt_virt.agent import publish
from rdt_virt.agent import sampler
from rdt_virt.agent import state
from rdt_virt import exception
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import telemetry

LOG = logging.getLogger(__name__)


# What one read(2) asks for: more than any counter's line (at most 21
# bytes; a longer text takes more reads).
READ_SIZE = 64


def read_small(path):
    """The bytes of a small file such as a counter.

    os.open/os.read rather than open(): a sample reads a thousand counter
    files, and a file object costs more than the read itself. A counter
    is one line, which kernfs's seq_file gives whole to the first read:
    a read that returns a single line ends it. Anything else (a file of
    several lines, a text without its newline) is read until EOF.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, READ_SIZE)
        # True for one whole line, and for EOF at once (b'').
        if data.find(b'\n') == len(data) - 1 and len(data) < READ_SIZE:
            return data
        chunks = [data]
        while data:
            data = os.read(fd, READ_SIZE)
            chunks.append(data)
    finally:
        os.close(fd)
    return b''.join(chunks)


def _parse_event(data):
    return telemetry.parse_event(data.decode())


class Sampling(object):
    """Rates of the instances and the published host state.

    :param conf: the oslo.config object.
    :param resctrl: a :class:`~rdt_virt.resctrl.fs.Resctrl` for reading.
    :param monitoring: the agent's
        :class:`~rdt_virt.agent.monitoring.Monitoring`.
    :param clock: monotonic seconds; ``wall``: epoch seconds.
    """

    def __init__(self, conf, resctrl, monitoring, clock, wall):
        self.conf = conf
        self.resctrl = resctrl
        self.monitoring = monitoring
        self.clock = clock
        self.wall = wall
        self.tracker = sampler.RateTracker()
        # {uuid: baselines} of the agent before this one (carry), for
        # the first sample only.
        self.carried = {}
        self.energy_tracker = energy_mod.EnergyTracker()
        self.energy = {}
        self.ceiling_source = None
        self.rates = {}
        self.last_doc = None
        # The event files of the groups read at this sample and at the
        # last (see _files); what to read per group, by kind (_layout).
        self._paths = {}
        self._paths_before = {}
        self._layouts = {}

    def set_ceiling(self, caps):
        mon = caps.monitor
        value, source = ceiling_mod.host_ceiling(
            self.conf.rdt_agent.memory_bandwidth_ceiling,
            len(mon.domain_ids) if mon else 1)
        self.tracker.ceiling = value
        self.ceiling_source = source
        LOG.info('Memory bandwidth ceiling %.0f GB/s (%s): faster counter '
                 'growth is taken for a counter reset',
                 value / ceiling_mod.GB, source)

    def _layout(self, caps, package=False):
        """``(domains, ((domain, directory), ...), events)`` to read.

        Kept while ``caps`` stays the same object (until a remount).
        """
        cached = self._layouts.get(package)
        if cached is None or cached[0] is not caps:
            if package:
                mon = caps.package_monitor
                dirs = tuple((p, telemetry.pkg_dir(p))
                             for p in mon.domain_ids)
                events = tuple(e for e in telemetry.FIXED_POINT_EVENTS
                               if e in mon.features)
            else:
                mon = caps.monitor
                dirs = tuple((d, 'mon_L3_%02d' % d) for d in mon.domain_ids)
                events = tuple(sorted(mon.features))
            cached = (caps, (tuple(d for d, _n in dirs), dirs, events))
            self._layouts[package] = cached
        return cached[1]

    def _files(self, counters, dirs, events):
        """``((domain, event, path), ...)`` of a group's event files.

        Joined once per group and kept while the group is sampled: joining
        a thousand paths at each sample cost more than reading the files.
        Names are validated when the paths are first made.
        """
        key = (counters, dirs, events)
        files = self._paths.get(key)
        if files is None:
            files = self._paths_before.get(key)
            if files is None:
                group, mon = counters
                base = self.resctrl.path(group, mon, 'mon_data')
                join = os.path.join
                files = tuple((dom, event, join(base, name, event))
                              for dom, name in dirs for event in events)
            self._paths[key] = files
        return files

    def _read(self, counters, layout, parse):
        """One Reading of a group's event files, each timed on its own.

        The kernel reads the hardware counter when the file is read, so
        the time of each read is what its value belongs to; a single
        time for all files would blur the rates by however long reading
        the others took.

        :param layout: ``(domains, ((domain, directory), ...), events)``.
        :param parse: turns a file's bytes into a MonValue.
        """
        doms, dirs, events = layout
        values = {dom: {} for dom in doms}
        times = {}
        clock = self.clock
        for dom, event, path in self._files(counters, dirs, events):
            t0 = clock()
            try:
                data = read_small(path)
            except FileNotFoundError:
                if not os.path.isdir(os.path.dirname(path)):
                    raise exception.GroupNotFound(
                        path=path, group=counters[1] or counters[0])
                continue
            except OSError as e:
                # Some kernels answer EIO for a counter in error.
                values[dom][event] = fs.MonValue(None,
                                                 os.strerror(e.errno))
                continue
            times[(dom, event)] = (t0 + clock()) / 2
            values[dom][event] = parse(data)
        return sampler.Reading(
            source=self.monitoring.source_key(counters),
            time=clock(), values=values, times=times)

    def read_counters(self, caps, counters):
        """One Reading of a group's L3 counters (CMT, MBM)."""
        return self._read(counters, self._layout(caps), fs.parse_mon_bytes)

    def read_package(self, caps, counters):
        """One Reading of a group's package telemetry (Intel AET).

        ``{package: {event: MonValue}}`` of ``core_energy`` and
        ``activity``.
        """
        return self._read(counters, self._layout(caps, package=True),
                          _parse_event)

    def _energy(self, caps, uuid, place):
        """Energy figures of one instance (None without telemetry)."""
        if place.counters is None:
            return energy_mod.Energy(reason=place.reason)
        try:
            reading = self.read_package(caps, place.counters)
        except (exception.ResctrlError, OSError) as e:
            LOG.debug('Cannot read package telemetry of %s: %s', uuid, e)
            return energy_mod.Energy(reason='counters unreadable')
        return self.energy_tracker.update(uuid, reading)

    def sample(self, caps, instances, placements, control=None):
        """Read counters, compute rates, publish; returns the document.

        :param control: called with the rates before they are published;
            returns the bandwidth controller's ``(levels in force, host
            part, limits, levels decided)``.
        """
        mon = self.monitoring
        self._paths_before, self._paths = self._paths, {}
        rates = {}
        telemetry_on = bool(caps and caps.package_monitor and
                            caps.package_monitor.energy)
        energy = {} if telemetry_on else None
        for uuid, place in sorted(placements.items()):
            if uuid not in instances:
                continue
            if telemetry_on:
                energy[uuid] = self._energy(caps, uuid, place)
            if place.counters is None:
                rates[uuid] = sampler.Rates(reason=place.reason)
                continue
            try:
                reading = self.read_counters(caps, place.counters)
            except (exception.ResctrlError, OSError) as e:
                rates[uuid] = sampler.Rates(reason='counters unreadable')
                LOG.debug('Cannot read counters of %s: %s', uuid, e)
                continue
            entry = self.carried.pop(uuid, None)
            if entry is not None and carry.matches(entry, reading.source):
                self.tracker.seed(uuid, reading.source, entry['counters'])
            rates[uuid] = self.tracker.update(uuid, reading)
            if mon.counter_info is not None and (
                    uuid not in mon.counter_rotation.window) and (
                    rates[uuid].mbm_total_bps is None):
                rates[uuid] = dataclasses.replace(
                    rates[uuid], reason=counters_mod.R_NO_COUNTER)
        self.carried = {}
        self.tracker.forget(set(rates))
        self.energy_tracker.forget(set(energy or ()))
        self.rates = rates
        self.energy = energy or {}
        levels, controller, limits, pending = control(rates) if control \
            else ({}, None, {}, None)
        doc = publish.build(
            self.wall(), self.conf.rdt_agent.sample_interval, instances,
            placements, rates, mon.rotation,
            rmids_total=caps.num_rmids if caps else 0,
            rmids_used=mon.rmids_used,
            closids_total=caps.num_closids if caps else 0,
            closids_used=mon.closids_used, mon_budget=mon.budget or 0,
            extra=self._host_extra(controller, caps), energy=energy,
            levels=levels, limits=limits, pending=pending)
        try:
            state.write(self.conf.rdt.state_file, doc)
        except OSError as e:
            LOG.warning('Cannot write the state file %s: %s',
                        self.conf.rdt.state_file, e)
        self.last_doc = doc
        return doc

    def _host_extra(self, controller=None, caps=None):
        extra = {'bandwidth_ceiling_bps': self.tracker.ceiling,
                 'counter_resets': self.tracker.jumps}
        if caps is not None:
            # Whether the mounted resctrl throttles memory bandwidth:
            # high-priority instances need it.
            extra['mba'] = caps.mb is not None
        if controller is not None:
            extra['controller'] = controller
        extra.update(self.monitoring.counter_info or {})
        return extra
