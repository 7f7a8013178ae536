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

"""What the running kernel's release says about resctrl, where nothing else
can.

rdt-virt probes behaviour where it can (rename, thread-id lists) and reads
what resctrl shows, but one limit is invisible: before Linux 6.16 the
kernel kept its free CLOSIDs in one 32-bit word (``closid_init()`` in
``arch/x86/kernel/cpu/resctrl/rdtgroup.c``: the minimum ``num_closid``
over the resources, starting from 32), so at most 32 CLOSIDs are usable,
whatever ``info/*/num_closids`` says. 6.16 ("x86/resctrl: Remove the limit
on the number of CLOSID") made it a bitmap of any size. Probing would mean
creating groups until ENOSPC, so the release (``/proc/sys/kernel/
osrelease``, ``[rdt] kernel_release_file``) decides; an unreadable or
unparsable release is taken as a kernel without the limit, which only
matters on hardware with more than 32 CLOSIDs.
"""

import re

#: CLOSIDs usable before the 6.16 change, the default group's included.
OLD_CLOSID_LIMIT = 32
#: The first release without the limit.
UNLIMITED_SINCE = (6, 16)

_RELEASE = re.compile(r'^\s*([0-9]+)\.([0-9]+)')


def parse(text):
    """``(major, minor)`` of an ``osrelease`` text (``6.1.0-18-amd64``).

    :returns: None when ``text`` is None or does not start with a version.
    """
    match = _RELEASE.match(text or '')
    if not match:
        return None
    return int(match.group(1)), int(match.group(2))


def closid_limit(text):
    """The kernel's own limit on CLOSIDs for an ``osrelease`` text.

    :returns: :data:`OLD_CLOSID_LIMIT` before 6.16, else 0 (no limit).
    """
    version = parse(text)
    if version is not None and version < UNLIMITED_SINCE:
        return OLD_CLOSID_LIMIT
    return 0
