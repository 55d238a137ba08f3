module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<1xf32>) -> tensor<2305843009213693952xf32> {
    %0 = "kiln.broadcast_to"(%arg0) {shape = #kiln.shape<[2305843009213693952]>} : (tensor<1xf32>) -> tensor<2305843009213693952xf32>
    %1 = "kiln.relu"(%0) : (tensor<2305843009213693952xf32>) -> tensor<2305843009213693952xf32>
    return %1 : tensor<2305843009213693952xf32>
  }
}
