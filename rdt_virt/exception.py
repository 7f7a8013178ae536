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

"""The rdt-virt exception hierarchy.

Every error raised by rdt-virt derives from :class:`RDTVirtException`. Each
class carries a message template (``msg_fmt``) filled from keyword arguments,
so callers pass facts, not prose, and the text stays uniform.
"""

from rdt_virt.i18n import _


class RDTVirtException(Exception):
    """Base class; subclasses set ``msg_fmt`` with ``%(name)s`` fields."""

    msg_fmt = _("An unknown rdt-virt error occurred.")

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            message = self.msg_fmt % kwargs
        self.message = message
        super().__init__(message)


# Resctrl filesystem ---------------------------------------------------------

class ResctrlError(RDTVirtException):
    """A resctrl filesystem operation failed."""

    msg_fmt = _("resctrl operation on %(path)s failed: %(reason)s")


class ResctrlNotMounted(ResctrlError):
    msg_fmt = _("resctrl is not mounted at %(path)s")


class ResctrlWriteError(ResctrlError):
    """A write was refused; ``status`` holds ``info/last_cmd_status``."""

    msg_fmt = _("writing %(data)r to %(path)s failed (%(error)s): %(status)s")

    def __init__(self, path, data, errno, error, status):
        self.path = path
        self.errno = errno
        self.status = status
        super().__init__(path=path, data=data, error=error, status=status)


class GroupExists(ResctrlError):
    msg_fmt = _("resctrl group %(group)s already exists")


class GroupNotFound(ResctrlError):
    msg_fmt = _("resctrl group %(group)s does not exist")


class NoSpace(ResctrlError):
    """mkdir failed with ENOSPC: no free CLOSID or RMID."""

    msg_fmt = _("cannot create resctrl group %(group)s: no free %(what)s "
                "(%(status)s)")


class RenameRefused(ResctrlError):
    """rename(2) of a monitoring group failed with EPERM or EOPNOTSUPP.

    Kernels before 6.5 cannot rename resctrl groups at all; later ones
    refuse moves they do not support (Arm MPAM: any new parent).
    """

    msg_fmt = _("cannot move monitoring group %(group)s to %(target)s: "
                "%(status)s")


class RMIDBusy(ResctrlError):
    """mkdir failed with EBUSY: the free RMIDs are still in limbo."""

    msg_fmt = _("cannot create resctrl monitoring group %(group)s: RMIDs are "
                "busy in limbo (%(status)s)")


class InvalidGroupName(RDTVirtException):
    msg_fmt = _("invalid resctrl group name %(name)r: %(reason)s")


class NotOwned(RDTVirtException):
    msg_fmt = _("resctrl group %(group)s is not owned by rdt-virt (prefix "
                "%(prefix)s)")


# Pure parsing ---------------------------------------------------------------

class InvalidSchemata(RDTVirtException):
    msg_fmt = _("invalid schemata %(text)r: %(reason)s")


class InvalidMask(RDTVirtException):
    msg_fmt = _("invalid cache bit mask %(mask)s: %(reason)s")


class InvalidCapabilities(RDTVirtException):
    msg_fmt = _("cannot read RDT capabilities from %(source)s: %(reason)s")


# Policy ---------------------------------------------------------------------

class InvalidExtraSpec(RDTVirtException):
    """An RDT flavor extra spec has a value outside what is allowed."""

    msg_fmt = _("invalid value %(value)r for extra spec %(key)s: "
                "%(allowed)s")

    def __init__(self, key, value, allowed):
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(key=key, value=value, allowed=allowed)


class HostCannotServe(RDTVirtException):
    """This host lacks a capability the policy needs."""

    msg_fmt = _("this host cannot serve the RDT policy: %(reason)s")

    def __init__(self, reason):
        self.reason = reason
        super().__init__(reason=reason)


class CapacityExhausted(RDTVirtException):
    """The host has the capability but not the free capacity right now."""

    msg_fmt = _("RDT capacity exhausted on this host: %(reason)s")

    def __init__(self, reason):
        self.reason = reason
        super().__init__(reason=reason)


# libvirt XML ----------------------------------------------------------------

class InvalidXML(RDTVirtException):
    msg_fmt = _("invalid %(what)s XML: %(reason)s")


# Host state file ------------------------------------------------------------

class InvalidStateFile(RDTVirtException):
    """The agent's state document cannot be trusted as a whole."""

    msg_fmt = _("invalid rdt-virt state document: %(reason)s")


# Configuration --------------------------------------------------------------

class InvalidConfig(RDTVirtException):
    """An option value this host cannot honour."""

    msg_fmt = _("invalid value %(value)r for option %(option)s on this "
                "host: %(reason)s")
