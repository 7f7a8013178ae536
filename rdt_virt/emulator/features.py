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

"""Files of newer kernels and hardware: counter assignment, io_alloc, BMEC.

:class:`FeatureFiles` is a part of :class:`model.ResctrlModel` kept apart
to keep modules small; it uses the model's state (``assign``, ``bmec``,
``io_alloc``, ``counters``) and its status helpers (``_run``, ``_fail``).
"""

import errno

from rdt_virt.emulator import counters as counters_mod
from rdt_virt.emulator import kparse
from rdt_virt.emulator import schemata

#: BMEC: every traffic type, and the local ones (reads, non-temporal
#: writes, slow-memory reads).
BMEC_ALL = 0x7f
BMEC_LOCAL = 0x15


class FeatureFiles(object):
    """Counter assignment, io_alloc and BMEC files of the model."""

    # Package telemetry (Intel AET, 7.0) ----------------------------------

    def telemetry_text(self, group, package, event):
        """``mon_PERF_PKG_XX/<event>``: own RMID plus its mon groups'."""
        self._update_counters()
        members = [group]
        if group.kind == 'ctrl':
            members += list(group.mons.values())
        rmids = [g.rmid for g in members]
        if event == 'core_energy':
            # Ground truth as of this read, for benchmarks: what the
            # reader should have counted from its own readings.
            self.telemetry_reads[(group.path or '/', package)] = sum(
                self.telemetry.truth(r, package, event) for r in rmids)
        return self.telemetry.read(rmids, package, event)

    def telemetry_truth(self, group, package, event):
        """Exact ground truth of *group*'s RMID (no fixed-point loss)."""
        self._update_counters()
        return self.telemetry.truth(group.rmid, package, event)

    # Counter assignment (mbm_event mode) -------------------------------------

    def _is_assigned(self, group, event, dom):
        if not self.assign_enabled:
            return True
        return self.assign.assigned(group, event, dom)

    # io_alloc (6.19) -----------------------------------------------------

    def _io_alloc_closid(self):
        """I/O traffic uses the highest CLOSID of the cache resource."""
        n = self.profile.l3.num_closids
        return (n // 2 if self.profile.cdp else n) - 1

    def io_alloc_text(self, schema):
        if not schema.resource.io_alloc_capable:
            return 'not supported\n'
        return 'enabled\n' if self.io_alloc else 'disabled\n'

    def io_alloc_cbm_text(self, schema):
        self._run(self._check_io_alloc, schema)
        closid = self._io_alloc_closid()
        vals = schemata.init_config(self.profile, self.ctrl_domains, closid,
                                    self.allocated())[schema.name]
        return ';'.join('%d=%x' % (d, vals[d]) for d in self.domains) + '\n'

    def _check_io_alloc(self, schema):
        if not schema.resource.io_alloc_capable:
            self._fail(errno.ENODEV, "io_alloc is not supported on %s\n"
                       % schema.name)
        if not self.io_alloc:
            self._fail(errno.EINVAL, "io_alloc is not enabled on %s\n"
                       % schema.name)

    def write_io_alloc(self, schema, text):
        # resctrl_io_alloc_write() in fs/resctrl/ctrlmondata.c.
        enable = kparse.kstrtobool(text)
        self._run(self._write_io_alloc, schema, enable)

    def _write_io_alloc(self, schema, enable):
        if not schema.resource.io_alloc_capable:
            self._fail(errno.ENODEV, "io_alloc is not supported on %s\n"
                       % schema.name)
        if enable == self.io_alloc:
            return
        closid = self._io_alloc_closid()
        if closid >= self.usable_closids:
            # resctrl_io_alloc_closid_supported(): L3's highest CLOSID
            # must be one every resource has.
            self._fail(errno.EINVAL, "io_alloc CLOSID (ctrl_hw_id) %d is "
                                     "not available\n" % closid)
        if enable:
            for group in self.groups.values():
                if group.closid == closid:
                    self._fail(errno.ENOSPC, "CLOSID (ctrl_hw_id) %d for "
                               "io_alloc is used by %s group\n"
                               % (closid, group.name))
        self.io_alloc = enable

    # Bandwidth event configuration (BMEC) -----------------------------------

    def bmec_visible(self):
        """The config files exist unless mbm_event mode hides them."""
        return self.bmec is not None and not self.assign_enabled

    def bmec_text(self, event):
        return ';'.join('%d=0x%02x' % (d, self.bmec[event][d])
                        for d in self.domains) + '\n'

    def write_bmec(self, event, text):
        self._run(self._write_bmec, event, text)

    def _write_bmec(self, event, text):
        text = text.split('\n', 1)[0]
        while text:
            item, _, text = text.partition(';')
            dom_text, eq, value = kparse.strim(item).partition('=')
            try:
                dom = kparse.kstrtoul(dom_text, 10)
                if not eq:
                    raise kparse.ParseError()
            except kparse.ParseError:
                self._fail(errno.EINVAL,
                           "Missing '=' or non-numeric domain id\n")
            try:
                val = kparse.kstrtoul(value, 16)
            except kparse.ParseError:
                self._fail(errno.EINVAL,
                           "Non-numeric event configuration value\n")
            if val & ~BMEC_ALL:
                self._fail(errno.EINVAL, "Invalid event configuration: max "
                                         "valid mask is 0x%02x\n" % BMEC_ALL)
            if dom not in self.domains:
                self._fail(errno.EINVAL)
            if self.bmec[event][dom] == val:
                continue
            self._update_counters()
            self.bmec[event][dom] = val
            # A new configuration resets every RMID's counters there.
            for group in self.all_groups():
                for ev in (counters_mod.TOTAL, counters_mod.LOCAL):
                    self.counters.zero(group, dom, ev)

    def _assign_new_group(self, group):
        """mkdir's counters: failures are reported, not fatal."""
        if self.assign_enabled and self.assign.on_mkdir:
            for text in self.assign.assign_all(group, self._new_counter):
                self._puts(text)

    def _new_counter(self, group, event, dom):
        self.counters.zero(group, dom, event)

    def _require_assign(self):
        # mbm_L3_assignments_show(), resctrl_mbm_assign_on_mkdir_show()
        # and _write() in fs/resctrl/monitor.c.
        if not self.assign_enabled:
            self._fail(errno.EINVAL, "mbm_event counter assignment mode is "
                                     "not enabled\n")

    def assignments_text(self, group):
        """``mbm_L3_assignments`` of *group*."""
        self._run(self._require_assign)
        return self.assign.format_group(group)

    def write_assignments(self, group, text):
        if not text.endswith('\n'):
            raise kparse.KernelError(errno.EINVAL)
        self._run(self._write_assignments, group, text[:-1])

    def _write_assignments(self, group, text):
        if not self.assign_enabled:
            self._fail(errno.EINVAL, "mbm_event mode is not enabled\n")
        self._update_counters()
        self.assign.write_group(group, text, self._new_counter)

    def assign_mode_text(self):
        if self.assign is None:
            return '[default]\n'
        if self.assign_enabled:
            return '[mbm_event]\ndefault\n'
        return '[default]\nmbm_event\n'

    def write_assign_mode(self, text):
        if not text.endswith('\n'):
            raise kparse.KernelError(errno.EINVAL)
        self._run(self._write_assign_mode, text[:-1])

    def _write_assign_mode(self, mode):
        if mode == 'default':
            enable = False
        elif mode == 'mbm_event':
            if self.assign is None:
                self._fail(errno.EINVAL, "mbm_event mode is not supported\n")
            enable = True
        else:
            self._fail(errno.EINVAL, "Unsupported assign mode\n")
        if enable == self.assign_enabled:
            return
        self._update_counters()
        # A switch frees every counter and resets the counts.
        for group in self.all_groups():
            self.assign.release(group)
            self.counters.reset(group)
        self.assign_enabled = enable
        if enable:
            # resctrl_mbm_assign_mode_write(): auto assignment comes back
            # with the mode.
            self.assign.on_mkdir = True

    def assign_counts_text(self, available):
        count = self.assign.available if available else (
            lambda dom: self.assign.num)
        return self.assign.format_counts(count)

    def assign_on_mkdir_text(self):
        self._run(self._require_assign)
        return '%d\n' % self.assign.on_mkdir

    def write_assign_on_mkdir(self, text):
        # kstrtobool() first, then the mode (status cleared) is checked.
        value = kparse.kstrtobool(text)
        self._run(self._write_assign_on_mkdir, value)

    def _write_assign_on_mkdir(self, value):
        self._require_assign()
        self.assign.on_mkdir = value
