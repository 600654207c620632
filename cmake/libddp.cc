// libddp.so is the library modules folded together; this unit only gives the target a source.
namespace ddp {
const char* version() { return "0.1.0"; }
}  // namespace ddp
