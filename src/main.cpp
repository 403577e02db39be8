#include <cstdio>

int main() {
  std::puts("resnet_ddp: the trainer's command line is not built yet");
  return 1;
}
