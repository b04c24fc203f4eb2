// Python string formatting: `"%s" % x` (also the `format` filter) and str.format().
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace infernix::jinja {

// printf-style: %s %r %a %c %d %i %u %x %X %o %f %F %e %E %g %G %%, with %(name)s keys, flags
// (-+ #0), width and precision (or '*'). `args` is a tuple of values, a dict for %(name)s, or a
// single value.
std::string PercentFormat(const std::string& format, const Value& args);

// str.format(): {} {0} {name} with [key] / .attr accessors, conversions !s !r !a, and format specs
// [[fill]align][sign][#][0][width][,|_][.precision][type]. No nested fields.
std::string BraceFormat(const std::string& format, const CallArgs& args);

}  // namespace infernix::jinja
