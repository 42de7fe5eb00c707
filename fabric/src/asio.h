// Boost.Asio 1.74 uses std::exchange in awaitable.hpp without including
// <utility> (fixed upstream later); include it first everywhere.
#pragma once

#include <utility>

#include <boost/asio.hpp>
