#pragma once
/// VGG-16 as torchvision builds it (torchvision.models.vgg16, configuration "D", no batch norm):
/// thirteen 3x3 convolutions with bias and in-place ReLU in five blocks, each block ending in a 2x2
/// max pool; an adaptive average pool to 7 x 7; the classifier Linear(25088, 4096), ReLU, Dropout(0.5),
/// Linear(4096, 4096), ReLU, Dropout(0.5), Linear(4096, classes); cross-entropy loss.

#include <roofsim/graph.hpp>

#include <string>

namespace roofsim::zoo {

/// torchvision vgg16 at image_size x image_size, `classes` outputs.
[[nodiscard]] inline Graph vgg16(std::int64_t image_size = 224, std::int64_t classes = 1000) {
    GraphBuilder b("vgg16");
    std::string x = b.input("images", {GraphBuilder::batch, 3, image_size, image_size});
    const std::string labels = b.input("labels", {GraphBuilder::batch}, DType::i64);
    const std::int64_t widths[5] = {64, 128, 256, 512, 512};
    const int convs[5] = {2, 2, 3, 3, 3};
    std::int64_t c_in = 3;
    int index = 0;  // torchvision's features.<index>: conv, relu and pool each take one
    for (int block = 0; block < 5; ++block) {
        for (int i = 0; i < convs[block]; ++i) {
            const std::string conv = "features." + std::to_string(index++);
            x = b.layer(conv, "conv2d", {x},
                        {{"in_channels", c_in}, {"out_channels", widths[block]}, {"kernel_size", std::int64_t(3)},
                         {"stride", std::int64_t(1)}, {"padding", std::int64_t(1)}, {"bias", true}});
            x = b.layer("features." + std::to_string(index++), "relu", {x}, {{"inplace", true}});
            c_in = widths[block];
        }
        x = b.layer("features." + std::to_string(index++), "maxpool2d", {x},
                    {{"kernel_size", std::int64_t(2)}, {"stride", std::int64_t(2)}, {"padding", std::int64_t(0)}});
    }
    x = b.layer("avgpool", "adaptive_avgpool2d", {x}, {{"output_size", std::int64_t(7)}});
    x = b.layer("flatten", "flatten", {x}, {{"start_dim", std::int64_t(1)}});
    x = b.layer("classifier.0", "linear", {x}, {{"in_features", c_in * 49}, {"out_features", std::int64_t(4096)}});
    x = b.layer("classifier.1", "relu", {x}, {{"inplace", true}});
    x = b.layer("classifier.2", "dropout", {x}, {{"p", 0.5}});
    x = b.layer("classifier.3", "linear", {x}, {{"in_features", std::int64_t(4096)}, {"out_features", std::int64_t(4096)}});
    x = b.layer("classifier.4", "relu", {x}, {{"inplace", true}});
    x = b.layer("classifier.5", "dropout", {x}, {{"p", 0.5}});
    x = b.layer("classifier.6", "linear", {x}, {{"in_features", std::int64_t(4096)}, {"out_features", classes}});
    b.layer("loss", "cross_entropy", {x, labels});
    return std::move(b).build();
}

}  // namespace roofsim::zoo
