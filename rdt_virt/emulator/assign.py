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

"""MBM counter assignment (``mbm_assign_mode`` ``[mbm_event]``, Linux 6.18).

Hardware with assignable counters (AMD ABMC, Zen 5) has only
``num_mbm_cntrs`` MBM counters per L3 domain. In ``mbm_event`` mode, the
default where the hardware has it, the kernel counts an event of a group
on a domain only while a counter is assigned to that (group, event,
domain); the counter file of an unassigned one reads ``Unassigned``. An
assigned counter starts from zero.

* ``info/L3_MON/num_mbm_cntrs`` and ``available_mbm_cntrs``:
  ``0=32;1=32``, per domain.
* ``info/L3_MON/mbm_assign_on_mkdir`` (``1`` by default): mkdir (and the
  mount, for the default group) assigns a counter for every MBM event on
  every domain while counters last; running out does not fail the mkdir.
  ``rdtgroup_assign_cntr_event()`` (6.18) stops an event at the first
  domain without a counter, on this path and for ``*=e`` alike; a later
  release is reported to carry on through the other domains, which the
  ``assign_continue`` kernel feature emulates (not checked in source).
* ``<group>/mbm_L3_assignments``: one line per MBM event,
  ``mbm_total_bytes:0=e;1=_`` (``e``: assigned, ``_``: not). A write of
  lines ``<event>:<domain>=<e|_>[;...]`` (``*`` for every domain) works
  in order and stops at the first failure, keeping what it did: no free
  counter is ENOSPC with ``Failed to allocate counter for <event> in
  domain <id>``.
* rmdir and a remount free the group's counters.

:class:`Assignments` keeps which (group, event) holds a counter on each
domain; it does no I/O and knows nothing of files.
"""

import errno

from rdt_virt.emulator import kparse

MBM_EVENTS = ('mbm_total_bytes', 'mbm_local_bytes')


class Assignments(object):
    """Counters of each domain and the (group, event) holding them.

    :param domains: monitoring domain ids.
    :param num_cntrs: counters per domain.
    :param events: the MBM events the hardware has, in kernel order.
    """

    def __init__(self, domains, num_cntrs, events, carry_on=False):
        self.domains = tuple(domains)
        self.num = num_cntrs
        self.events = tuple(e for e in MBM_EVENTS if e in events)
        self.held = {d: [] for d in self.domains}   # [(group, event)]
        self.on_mkdir = True
        #: An event assigned to every domain goes on past a domain without
        #: a free counter (False: it stops there, as 6.18 does).
        self.carry_on = carry_on

    def assigned(self, group, event, dom):
        return (group, event) in self.held.get(dom, ())

    def available(self, dom):
        return self.num - len(self.held[dom])

    def assign(self, group, event, dom):
        """Give (group, event) a counter on *dom*; True if newly given.

        :raises kparse.KernelError: ENOSPC when the domain has none left.
        """
        if self.assigned(group, event, dom):
            return False
        if not self.available(dom):
            raise kparse.KernelError(
                errno.ENOSPC, "Failed to allocate counter for %s in domain "
                              "%d\n" % (event, dom))
        self.held[dom].append((group, event))
        return True

    def unassign(self, group, event, dom):
        if self.assigned(group, event, dom):
            self.held[dom].remove((group, event))

    def release(self, group):
        """Free every counter of *group* (rmdir)."""
        for dom in self.domains:
            self.held[dom] = [h for h in self.held[dom] if h[0] is not group]

    def assign_all(self, group, on_new=None):
        """Every event on every domain while counters last (mkdir).

        :param on_new: ``f(group, event, dom)`` for each new assignment.
        :returns: the failure texts, one per (event, domain) left out.
        """
        failures = []
        for event in self.events:
            for dom in self.domains:
                try:
                    if self.assign(group, event, dom) and on_new:
                        on_new(group, event, dom)
                except kparse.KernelError as e:
                    failures.append(e.status)
                    if not self.carry_on:
                        break
        return failures

    # Files -------------------------------------------------------------------

    def format_counts(self, counts):
        return ';'.join('%d=%d' % (d, counts(d)) for d in self.domains) + '\n'

    def format_group(self, group):
        """The text of ``mbm_L3_assignments``."""
        return ''.join('%s:%s\n' % (event, ';'.join(
            '%d=%s' % (d, 'e' if self.assigned(group, event, d) else '_')
            for d in self.domains)) for event in self.events)

    def write_group(self, group, text, on_new=None):
        """Apply a write to ``mbm_L3_assignments`` (without its newline).

        Works line by line and domain by domain, stopping at the first
        failure with what was done kept, as the kernel does.
        """
        for line in text.split('\n'):
            event, _, rest = line.partition(':')
            if event not in self.events:
                raise kparse.KernelError(errno.ENOENT,
                                         "Invalid event %s\n" % event)
            while rest:
                item, _, rest = rest.partition(';')
                item = kparse.strim(item)
                dom_text, _, state = item.partition('=')
                if dom_text.startswith('*'):
                    self._apply(group, event, self.domains, state,
                                "Assign operation '%s:*=%s' failed\n"
                                % (event, state), on_new)
                    break
                try:
                    dom = kparse.kstrtoul(dom_text, 10)
                except kparse.ParseError:
                    raise kparse.KernelError(errno.EINVAL,
                                             "Missing domain id\n") from None
                if dom not in self.domains:
                    raise kparse.KernelError(
                        errno.EINVAL, "Invalid domain id %d\n" % dom)
                self._apply(group, event, (dom,), state,
                            "Assign operation '%s:%d=%s' failed\n"
                            % (event, dom, state), on_new)

    def _apply(self, group, event, doms, state, failed, on_new):
        if state not in ('e', '_'):
            raise kparse.KernelError(errno.EINVAL, failed)
        error = None
        for dom in doms:
            if state == '_':
                self.unassign(group, event, dom)
                continue
            try:
                if self.assign(group, event, dom) and on_new:
                    on_new(group, event, dom)
            except kparse.KernelError as e:
                if error is None:
                    error = kparse.KernelError(e.errno, e.status)
                else:
                    error = kparse.KernelError(error.errno,
                                               error.status + e.status)
                if not self.carry_on:
                    break
        if error is not None:
            raise kparse.KernelError(error.errno, error.status + failed)
