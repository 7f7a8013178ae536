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

"""The resctrl file layout over the model, with the kernel's errnos.

::

    /                      cpus cpus_list mode schemata size tasks
    /info/                 last_cmd_status
    /info/<SCHEMA>/        num_closids cbm_mask min_cbm_bits shareable_bits
                           bit_usage sparse_masks          (cache schemas)
                           num_closids min_bandwidth bandwidth_gran
                           delay_linear [thread_throttle_mode]   (MB, SMBA)
    /info/L3_MON/          num_rmids mon_features max_threshold_occupancy
                           [mbm_assign_mode] [num_mbm_cntrs
                           available_mbm_cntrs mbm_assign_on_mkdir]
    /<ctrl>/               the root's files, mon_data/, mon_groups/
    .../mon_groups/<mon>/  cpus cpus_list tasks mon_data/
                           [mbm_L3_assignments] (also in control groups)
    .../mon_data/mon_L3_XX/{llc_occupancy,mbm_total_bytes,mbm_local_bytes}
    /info/PERF_PKG_MON/    num_rmids mon_features    (Intel AET, 7.0)
    .../mon_data/mon_PERF_PKG_XX/{core_energy,activity,...}

``mkdir`` in the root makes a control group and in a ``mon_groups``
directory a monitoring group; anywhere else, ``info`` included, it fails
with EPERM (``rdtgroup_mkdir()``). ``rmdir`` only removes groups (EPERM
otherwise). The root is 0555, as kernfs makes a root directory, and
``info`` and its directories take their parent's mode
(``rdtgroup_create_info_dir()``); a group's own directories take the mode
of its mkdir. Files are 0644 when writable and 0444 otherwise, report a
size of 0 like kernfs, and a write is one command (at most one page).
Every mutation is logged.

:class:`ResctrlTree` is what the FUSE layer calls; it takes the model lock
around every operation, as the kernel takes ``rdtgroup_mutex``.
"""

import collections
import errno
import stat

from rdt_virt.emulator import kparse
from rdt_virt.emulator import model as model_mod

PAGE_SIZE = 4096

Context = collections.namedtuple('Context', 'uid gid pid')
ROOT_CONTEXT = Context(0, 0, 0)

# Node kinds.
GROUP = 'group'            # a control or monitoring group directory
INFO = 'info'              # /info
INFO_RES = 'info-res'      # /info/<name>
MONGROUPS = 'mon_groups'   # <ctrl>/mon_groups
MONDATA = 'mon_data'       # <group>/mon_data
MONDOM = 'mon-dom'         # <group>/mon_data/mon_L3_XX
MONSUB = 'mon-sub'         # .../mon_L3_XX/mon_sub_L3_YY (SNC)
MONPKG = 'mon-pkg'         # <group>/mon_data/mon_PERF_PKG_XX (AET)
PKG_FILE = 'pkg-file'      # a package telemetry counter file
FILE = 'file'              # a group file
INFO_FILE = 'info-file'    # a file under /info
MON_FILE = 'mon-file'      # a counter file

_DIRS = (GROUP, INFO, INFO_RES, MONGROUPS, MONDATA, MONDOM, MONSUB,
         MONPKG)

Node = collections.namedtuple('Node', 'kind group name extra')

_CTRL_FILES = ('cpus', 'cpus_list', 'mode', 'schemata', 'size', 'tasks')
_MON_FILES = ('cpus', 'cpus_list', 'tasks')
_READ_ONLY = ('size',)
_CACHE_INFO = ('bit_usage', 'cbm_mask', 'min_cbm_bits', 'num_closids',
               'shareable_bits', 'sparse_masks')
_BW_INFO = ('bandwidth_gran', 'delay_linear', 'min_bandwidth',
            'num_closids')
_MON_INFO = ('max_threshold_occupancy', 'mon_features', 'num_rmids')
# PERF_PKG_MON has the files every monitoring resource has.
_PKG_INFO = ('mon_features', 'num_rmids')
PKG_MON = 'PERF_PKG_MON'
_INFO_WRITABLE = ('max_threshold_occupancy', 'mbm_assign_mode', 'io_alloc',
                  'mbm_assign_on_mkdir', 'mbm_total_bytes_config',
                  'mbm_local_bytes_config')
_BMEC_EVENTS = ('mbm_total_bytes', 'mbm_local_bytes')


def _err(code):
    return kparse.KernelError(code)


class ResctrlTree(object):
    """Path-level operations of the emulated resctrl filesystem."""

    def __init__(self, model, mount_time=0.0):
        self.model = model
        self.mount_time = mount_time

    # Resolution --------------------------------------------------------------

    def _info_dirs(self):
        prof = self.model.profile
        out = collections.OrderedDict(
            (s.name, s) for s in prof.schemas)
        if prof.mon:
            out['L3_MON'] = prof.mon
        if self.model.telemetry is not None:
            out[PKG_MON] = prof.telemetry
        return out

    def _info_files(self, name):
        prof = self.model.profile
        if name == PKG_MON:
            return _PKG_INFO
        if name == 'L3_MON':
            files = _MON_INFO
            if self.model.has('mbm_assign'):
                # Every L3_MON of 6.18+ has it, with or without MBM.
                files += ('mbm_assign_mode',)
            if self.model.assign is not None:
                files += ('available_mbm_cntrs', 'mbm_assign_on_mkdir',
                          'num_mbm_cntrs')
            if self.model.bmec_visible():
                files += tuple(e + '_config' for e in _BMEC_EVENTS
                               if e in prof.mon.events)
            return files
        schema = prof.schema(name)
        if schema.is_cache:
            files = _CACHE_INFO
            if not self.model.has('sparse_masks'):
                files = tuple(f for f in files if f != 'sparse_masks')
            if self.model.has('io_alloc') and any(
                    s.is_cache and s.resource.io_alloc_capable
                    for s in prof.schemas):
                # io_alloc_init(): only where L3 can, and then on every
                # cache resource (L2 answers "not supported").
                files += ('io_alloc', 'io_alloc_cbm')
            return files
        modes = [r.throttle_mode for r in (prof.mb, prof.smba) if r]
        if any(modes):
            return _BW_INFO + ('thread_throttle_mode',)
        return _BW_INFO

    def _children(self, node):
        """Names inside a directory node, in a stable order."""
        m = self.model
        prof = m.profile
        if node.kind == GROUP:
            group = node.group
            names = list(_CTRL_FILES if group.kind == model_mod.CTRL
                         else _MON_FILES)
            if m.assign is not None:
                names.append('mbm_L3_assignments')
            if prof.mon_capable:
                names.append('mon_data')
                if group.kind == model_mod.CTRL:
                    names.append('mon_groups')
            if group is m.root:
                names.append('info')
                names.extend(m.groups)
            return names
        if node.kind == INFO:
            return ['last_cmd_status'] + list(self._info_dirs())
        if node.kind == INFO_RES:
            return list(self._info_files(node.name))
        if node.kind == MONGROUPS:
            return list(node.group.mons)
        if node.kind == MONDATA:
            names = ['mon_L3_%02d' % d for d in m.domains]
            if m.telemetry is not None:
                names += ['mon_PERF_PKG_%02d' % d for d in m.domains]
            return names
        if node.kind == MONPKG:
            return list(prof.telemetry.events)
        if node.kind == MONDOM:
            names = list(prof.mon.events)
            if m.snc > 1:
                names += ['mon_sub_L3_%02d' % n for n in m.nodes_of(
                    node.extra)]
            return names
        if node.kind == MONSUB:
            return list(prof.mon.events)
        raise _err(errno.ENOTDIR)

    def _child(self, node, name):
        if name not in self._children(node):
            raise _err(errno.ENOENT)
        return self._node(node, name)

    def _node(self, node, name):
        """The node of ``name``, an entry of directory ``node``."""
        m = self.model
        if node.kind == GROUP:
            group = node.group
            if name == 'info':
                return Node(INFO, None, name, None)
            if name == 'mon_data':
                return Node(MONDATA, group, name, None)
            if name == 'mon_groups':
                return Node(MONGROUPS, group, name, None)
            if group is m.root and name in m.groups:
                return Node(GROUP, m.groups[name], name, None)
            return Node(FILE, group, name, None)
        if node.kind == INFO:
            if name == 'last_cmd_status':
                return Node(INFO_FILE, None, name, None)
            return Node(INFO_RES, None, name, None)
        if node.kind == INFO_RES:
            return Node(INFO_FILE, None, name, node.name)
        if node.kind == MONGROUPS:
            return Node(GROUP, node.group.mons[name], name, None)
        if node.kind == MONDATA and name.startswith('mon_PERF_PKG_'):
            return Node(MONPKG, node.group, name, int(name[-2:]))
        if node.kind == MONDATA:
            return Node(MONDOM, node.group, name, int(name[-2:]))
        if node.kind == MONPKG:
            return Node(PKG_FILE, node.group, name, node.extra)
        if node.kind == MONDOM and name.startswith('mon_sub_L3_'):
            return Node(MONSUB, node.group, name, (node.extra,
                                                   int(name[-2:])))
        return Node(MON_FILE, node.group, name, node.extra)

    def resolve(self, path):
        """The :class:`Node` at *path*, or KernelError(ENOENT/ENOTDIR)."""
        node = Node(GROUP, self.model.root, '', None)
        for part in [p for p in path.split('/') if p]:
            if node.kind not in _DIRS:
                raise _err(errno.ENOTDIR)
            node = self._child(node, part)
        return node

    def _split(self, path):
        parts = [p for p in path.split('/') if p]
        if not parts:
            raise _err(errno.EBUSY)
        return '/'.join(parts[:-1]), parts[-1]

    # Attributes --------------------------------------------------------------

    def _owner_mode(self, node):
        """``(uid, gid, permission bits, ctime)`` of a node."""
        group = node.group
        if node.kind in (INFO, INFO_RES):
            return 0, 0, self.model.root.dirmode, None
        if node.kind == INFO_FILE:
            mode = 0o644 if node.name in _INFO_WRITABLE else 0o444
            return 0, 0, mode, None
        base = group.ctrl if node.kind == MONGROUPS else group
        if node.kind in (GROUP, MONGROUPS, MONDATA, MONDOM, MONSUB, MONPKG):
            return base.uid, base.gid, base.dirmode, base.ctime
        if node.kind in (MON_FILE, PKG_FILE) or node.name in _READ_ONLY:
            return group.uid, group.gid, 0o444, group.ctime
        return group.uid, group.gid, 0o644, group.ctime

    def getattr(self, path):
        with self.model.lock:
            node = self.resolve(path)
            uid, gid, mode, ctime = self._owner_mode(node)
            ctime = ctime or self.mount_time
            if node.kind in _DIRS:
                subdirs = [n for n in self._children(node)
                           if self._node(node, n).kind in _DIRS]
                st_mode, nlink = stat.S_IFDIR | mode, 2 + len(subdirs)
            else:
                st_mode, nlink = stat.S_IFREG | mode, 1
            return {'st_mode': st_mode, 'st_nlink': nlink, 'st_uid': uid,
                    'st_gid': gid, 'st_size': 0, 'st_atime': ctime,
                    'st_mtime': ctime, 'st_ctime': ctime}

    def readdir(self, path):
        with self.model.lock:
            node = self.resolve(path)
            if node.kind not in _DIRS:
                raise _err(errno.ENOTDIR)
            return self._children(node)

    def readdir_modes(self, path):
        """``(name, file type bits)`` of each entry, for typed listings."""
        with self.model.lock:
            node = self.resolve(path)
            if node.kind not in _DIRS:
                raise _err(errno.ENOTDIR)
            return [(name, stat.S_IFDIR if self._node(node, name).kind
                     in _DIRS else stat.S_IFREG)
                    for name in self._children(node)]

    def check_open(self, path, writing):
        """kernfs refuses to open a read-only file for writing (EACCES)."""
        with self.model.lock:
            node = self.resolve(path)
            if node.kind in _DIRS:
                if writing:
                    raise _err(errno.EISDIR)
                return
            if writing and not self._owner_mode(node)[2] & 0o222:
                raise _err(errno.EACCES)

    # Reading -----------------------------------------------------------------

    def read(self, path):
        """The whole text of a file, as the kernel would print it now."""
        with self.model.lock:
            node = self.resolve(path)
            if node.kind in _DIRS:
                raise _err(errno.EISDIR)
            if node.kind == FILE:
                if self.model.has('status_on_access'):
                    self.model._clear()
                return self._group_file(node.group, node.name)
            if node.kind == PKG_FILE:
                return self.model.telemetry_text(node.group, node.extra,
                                                 node.name) + '\n'

            if node.kind == MON_FILE:
                if isinstance(node.extra, tuple):
                    val = self.model.read_counter(node.group, node.extra[0],
                                                  node.name, node.extra[1])
                else:
                    val = self.model.read_counter(node.group, node.extra,
                                                  node.name)
                return '%s\n' % val
            if node.extra is None:
                return self.model.last_cmd_status
            return self._info_file(node.extra, node.name)

    def _group_file(self, group, name):
        m = self.model
        if name in ('cpus', 'cpus_list'):
            return m.cpus_text(group, as_list=name == 'cpus_list')
        if name == 'tasks':
            return ''.join('%d\n' % t for t in m.tasks(group))
        if name == 'mode':
            return group.mode + '\n'
        if name == 'schemata':
            return m.schemata_text(group)
        if name == 'mbm_L3_assignments':
            return m.assignments_text(group)
        return m.size_text(group)

    def _info_file(self, dirname, name):
        m = self.model
        prof = m.profile
        if dirname == PKG_MON:
            if name == 'num_rmids':
                return '%d\n' % prof.telemetry.num_rmids
            return ''.join(e + '\n' for e in prof.telemetry.events)
        if dirname == 'L3_MON':
            if name == 'num_rmids':
                if prof.arch == 'mpam':
                    # resctrl_arch_system_num_rmid_idx(): PMG x PARTID,
                    # halved with the emulated CDP.
                    return '%d\n' % prof.num_rmids
                # With SNC the RMIDs are shared out between the nodes.
                return '%d\n' % (prof.mon.num_rmids // m.snc)
            if name == 'mon_features':
                # rdt_mon_features_show(): a configurable event (BMEC)
                # is followed by its _config file outside mbm_event mode.
                out = []
                for e in prof.mon.events:
                    out.append(e + '\n')
                    if m.bmec_visible() and e in _BMEC_EVENTS:
                        out.append(e + '_config\n')
                return ''.join(out)
            if name == 'mbm_assign_mode':
                return m.assign_mode_text()
            if name in ('num_mbm_cntrs', 'available_mbm_cntrs'):
                return m.assign_counts_text(name == 'available_mbm_cntrs')
            if name == 'mbm_assign_on_mkdir':
                return m.assign_on_mkdir_text()
            if name.endswith('_config'):
                return m.bmec_text(name[:-len('_config')])
            return '%d\n' % m.max_threshold
        schema = prof.schema(dirname)
        res = schema.resource
        values = {'num_closids': '%d' % schema.num_closids}
        if schema.is_cache:
            values.update(cbm_mask='%x' % res.cbm_mask,
                          min_cbm_bits='%d' % res.min_cbm_bits,
                          shareable_bits='%x' % res.shareable_bits,
                          sparse_masks='%d' % res.sparse_masks)
            if name == 'bit_usage':
                return m.bit_usage_text(schema)
            if name == 'io_alloc':
                return m.io_alloc_text(schema)
            if name == 'io_alloc_cbm':
                return m.io_alloc_cbm_text(schema)
        else:
            values.update(min_bandwidth='%d' % res.min_bandwidth,
                          bandwidth_gran='%d' % res.bandwidth_gran,
                          delay_linear='%d' % res.delay_linear,
                          thread_throttle_mode=res.throttle_mode or
                          'undefined')
        return values[name] + '\n'

    # Mutations ---------------------------------------------------------------

    def _logged(self, op, path, data, func, *args):
        m = self.model
        try:
            result = func(*args)
        except kparse.KernelError as e:
            m.log.record(op, path, data, e.errno, m.last_cmd_status)
            raise
        m.log.record(op, path, data, 0, m.last_cmd_status)
        return result

    def write(self, path, data, ctx=ROOT_CONTEXT):
        """One ``write()`` system call: a whole command.

        :param data: bytes as written.
        :returns: the number of bytes consumed.
        """
        text = data.decode('latin-1') if isinstance(data, bytes) else data
        with self.model.lock:
            self._logged('write', path, text, self._write, path, text, ctx)
            return len(data)

    def _write(self, path, text, ctx):
        m = self.model
        node = self.resolve(path)
        if node.kind in _DIRS:
            raise _err(errno.EISDIR)
        if len(text) > PAGE_SIZE:
            raise _err(errno.E2BIG)
        if node.kind == FILE:
            group, name = node.group, node.name
            if name == 'schemata':
                return m.write_schemata(group, text)
            if name == 'mode':
                return m.write_mode(group, text)
            if name in ('cpus', 'cpus_list'):
                return m.write_cpus(group, text, name == 'cpus_list')
            if name == 'tasks':
                return m.write_tasks(group, text, ctx.pid, ctx.uid)
            if name == 'mbm_L3_assignments':
                return m.write_assignments(group, text)
        if node.kind == INFO_FILE and node.name == 'max_threshold_occupancy':
            return m.write_max_threshold(text)
        if node.kind == INFO_FILE and node.name == 'mbm_assign_mode':
            return m.write_assign_mode(text)
        if node.kind == INFO_FILE and node.name == 'mbm_assign_on_mkdir':
            return m.write_assign_on_mkdir(text)
        if node.kind == INFO_FILE and node.name == 'io_alloc':
            return m.write_io_alloc(m.profile.schema(node.extra), text)
        if node.kind == INFO_FILE and node.name.endswith('_bytes_config'):
            return m.write_bmec(node.name[:-len('_config')], text)
        raise _err(errno.EINVAL)

    def mkdir(self, path, mode=0o755, ctx=ROOT_CONTEXT):
        with self.model.lock:
            return self._logged('mkdir', path, None, self._mkdir, path,
                                mode, ctx)

    def _mkdir(self, path, mode, ctx):
        m = self.model
        parent_path, name = self._split(path)
        parent = self.resolve(parent_path)
        if parent.kind not in _DIRS:
            raise _err(errno.ENOTDIR)
        if name in self._children(parent):
            raise _err(errno.EEXIST)
        if '\n' in name:
            raise _err(errno.EINVAL)
        if parent.kind in (INFO, INFO_RES):
            raise _err(errno.EPERM)
        args = (ctx.uid, ctx.gid, mode & 0o7777)
        if parent.kind == GROUP and parent.group is m.root:
            return m.mkdir_ctrl(name, *args)
        if parent.kind == MONGROUPS and name != 'mon_groups':
            return m.mkdir_mon(parent.group, name, *args)
        return m.refuse_mkdir()

    def rmdir(self, path):
        with self.model.lock:
            return self._logged('rmdir', path, None, self._rmdir, path)

    def _rmdir(self, path):
        node = self.resolve(path)
        if node.kind not in _DIRS:
            raise _err(errno.ENOTDIR)
        if node.kind != GROUP or node.group is self.model.root:
            raise _err(errno.EPERM)
        return self.model.rmdir(node.group)

    def rename(self, old, new):
        with self.model.lock:
            return self._logged('rename', old, new, self._rename, old, new)

    def _rename(self, old, new):
        m = self.model
        src = self.resolve(old)
        parent_path, new_name = self._split(new)
        dst_parent = self.resolve(parent_path)
        in_info = (INFO, INFO_RES)
        if src.kind in in_info or dst_parent.kind in in_info or (
                src.kind == INFO_FILE and not src.extra):
            raise _err(errno.ENOENT)
        if not m.has('mon_rename'):
            # Before 6.5 resctrl has no rename operation: kernfs refuses.
            raise _err(errno.EPERM)
        if src.kind not in _DIRS or dst_parent.kind not in _DIRS:
            # The kernel's text really lacks the newline.
            return m.refuse_rename(
                "Source and destination must be directories")
        if src.kind != GROUP or src.group.kind != model_mod.MON:
            return m.refuse_rename("Source must be a MON group\n")
        if dst_parent.kind != MONGROUPS or new_name == 'mon_groups':
            return m.refuse_rename(
                "Destination must be a mon_groups subdirectory\n")
        return m.rename_mon(src.group, dst_parent.group, new_name)
