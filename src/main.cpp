#include "cli/app.h"

int main(int argc, char** argv) { return pf::cli::run(argc, argv); }
