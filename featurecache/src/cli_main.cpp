#include "cli.hpp"

int main(int argc, char** argv) {
  return hpcml::featurecache::RunCli(argc, argv);
}
