// libddp.so's own unit: the library's version (CMake's project version, as ddp_version() and
// ddp-launch --version give it).
namespace ddp {
const char* version() { return DDP_VERSION; }
}  // namespace ddp
