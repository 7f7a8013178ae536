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

"""DevStack's ``iniset``/``iniadd``/``iniget`` on oslo.config files.

The cloud writes every service's configuration with these, and runs the
DevStack plugin with them standing in for DevStack's own, so that the
plugin's settings reach the cloud through the same calls. Like DevStack's:
a file, a section and an option are created when missing; ``iniset``
replaces every line of the option with one; ``iniadd`` adds a value to a
multi-valued option unless present; comments and order are kept.

    python -m rdt_virt.cloud.ini set|add FILE SECTION OPTION VALUE
    python -m rdt_virt.cloud.ini get FILE SECTION OPTION
"""

import os
import re
import sys

_SECTION = re.compile(r'^\s*\[([^\]]+)\]\s*$')
_OPTION = re.compile(r'^\s*([^#;=\s][^=]*?)\s*=\s?(.*)$')


def _read(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def _write(path, lines):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.replace(tmp, path)


def _span(lines, section):
    """(start, end) line indexes of a section's body, or None."""
    start = None
    for i, line in enumerate(lines):
        m = _SECTION.match(line)
        if m:
            if start is not None:
                return start, i
            if m.group(1).strip() == section:
                start = i + 1
    return (start, len(lines)) if start is not None else None


def _values(lines, span, option):
    return [(i, _OPTION.match(lines[i]).group(2))
            for i in range(*span)
            if _OPTION.match(lines[i]) and
            _OPTION.match(lines[i]).group(1) == option]


def get_all(path, section, option):
    lines = _read(path)
    span = _span(lines, section)
    return [v for _, v in _values(lines, span, option)] if span else []


def get(path, section, option):
    values = get_all(path, section, option)
    return values[0] if values else ''


def set_values(path, section, option, values):
    """Make ``values`` the option's only lines (in that order)."""
    lines = _read(path)
    span = _span(lines, section)
    if span is None:
        if lines and lines[-1].strip():
            lines.append('')
        lines.append('[%s]' % section)
        span = (len(lines), len(lines))
    old = _values(lines, span, option)
    new = ['%s = %s' % (option, v) for v in values]
    if old:
        at = old[0][0]
        for i, _ in reversed(old):
            del lines[i]
    else:
        # After the section's last non-blank line.
        at = span[1]
        while at > span[0] and not lines[at - 1].strip():
            at -= 1
    lines[at:at] = new
    _write(path, lines)


def iniset(path, section, option, value):
    set_values(path, section, option, [value])


def iniadd(path, section, option, value):
    values = get_all(path, section, option)
    if value not in values:
        set_values(path, section, option, values + [value])


def remove_section(path, section):
    lines = _read(path)
    span = _span(lines, section)
    if span:
        del lines[span[0] - 1:span[1]]
        _write(path, lines)


def set_many(path, sections):
    """``{section: {option: value or [values]}}`` with iniset."""
    for section, options in sections.items():
        for option, value in options.items():
            if isinstance(value, (list, tuple)):
                set_values(path, section, option, [str(v) for v in value])
            else:
                iniset(path, section, option, str(value))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 4 and argv[0] == 'get':
        print(get(*argv[1:]))
    elif len(argv) == 5 and argv[0] in ('set', 'add'):
        (iniset if argv[0] == 'set' else iniadd)(*argv[1:])
    else:
        print('usage: python -m rdt_virt.cloud.ini set|add FILE SECTION '
              'OPTION VALUE | get FILE SECTION OPTION', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
