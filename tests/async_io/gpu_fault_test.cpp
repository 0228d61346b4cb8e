#include <cuasync/async_io.hpp>
