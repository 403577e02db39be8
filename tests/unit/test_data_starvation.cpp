// data_starvation_warning: who speaks when a rank's loader falls behind, and from what share on.
#include <doctest/doctest.h>

#include <string>

#include "resnet_ddp/train/data_starvation.h"
#include "support/text_contains.h"

using namespace rddp;
using testing::contains;

TEST_CASE("only the rank that waited the most for its data warns, from 10 % of the epoch on") {
  const ddp::RankMaximum rank5{0.38, 5};
  CHECK(data_starvation_warning(2, 0, 8, rank5, 4).empty());  // rank 0 waited less
  const std::string warning = data_starvation_warning(2, 5, 8, rank5, 4);
  CHECK(contains(warning, "epoch 3: this rank waited for its data 38.0% of the time"));
  CHECK(contains(warning, "the most of the 8 ranks"));
  CHECK(contains(warning, "its 4 loader thread(s) fall behind"));
  CHECK(contains(warning, "--num-workers"));
  CHECK(contains(warning, "resnet_ddp_pack"));

  CHECK(data_starvation_warning(0, 5, 8, {0.099, 5}, 4).empty());
  CHECK_FALSE(data_starvation_warning(0, 5, 8, {kStarvedDataWaitShare, 5}, 4).empty());
  CHECK(data_starvation_warning(0, 0, 8, {0.5, -1}, 4).empty());  // every share was NaN
}

TEST_CASE("a single process names training, not a rank") {
  const std::string warning = data_starvation_warning(0, 0, 1, {0.25, 0}, 2);
  CHECK(contains(warning, "epoch 1: training waited for its data 25.0% of the time"));
  CHECK_FALSE(contains(warning, "rank"));
}
